"""ordo: ordered, resumable event pipelines — events by tag, segments, contiguous acks, CDC."""

from __future__ import annotations

from ordo.errors import (
    BucketSizeMismatchError,
    ConcurrencyConflictError,
    ConfigurationError,
    InvalidIdentifierError,
    InvalidInputError,
    InvalidSequenceNrError,
    MissingFolderError,
    MissingTaggedEventError,
    OrdoError,
    SchemaVersionError,
    SerializationError,
    StorageAccessError,
    StorageError,
    StorageUnavailableError,
    TransactionConflictError,
)
from ordo.journal import AppendReceipt, Journal, NewEvent, PersistedEvent
from ordo.query import NO_OFFSET, EventEnvelope, EventsByTag
from ordo.settings import EventsByTagSettings, QuerySettings
from ordo.storage.open import events_by_tag_at, init_storage, open_journal, open_stores
from ordo.time import BucketSize, TimeUUID

__all__ = [
    "NO_OFFSET",
    "AppendReceipt",
    "BucketSize",
    "BucketSizeMismatchError",
    "ConcurrencyConflictError",
    "ConfigurationError",
    "EventEnvelope",
    "EventsByTag",
    "EventsByTagSettings",
    "InvalidIdentifierError",
    "InvalidInputError",
    "InvalidSequenceNrError",
    "Journal",
    "MissingFolderError",
    "MissingTaggedEventError",
    "NewEvent",
    "OrdoError",
    "PersistedEvent",
    "QuerySettings",
    "SchemaVersionError",
    "SerializationError",
    "StorageAccessError",
    "StorageError",
    "StorageUnavailableError",
    "TimeUUID",
    "TransactionConflictError",
    "events_by_tag_at",
    "init_storage",
    "open_journal",
    "open_stores",
]
