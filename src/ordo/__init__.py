"""ordo: ordered, resumable event pipelines — events by tag, segments, contiguous acks, CDC."""

from __future__ import annotations

from ordo.errors import (
    BucketSizeMismatchError,
    ConcurrencyConflictError,
    ConfigurationError,
    InvalidIdentifierError,
    InvalidInputError,
    InvalidSequenceNrError,
    OrdoError,
    SchemaVersionError,
    SerializationError,
    StorageError,
    StorageUnavailableError,
)
from ordo.journal import AppendReceipt, Journal, NewEvent, PersistedEvent
from ordo.settings import EventsByTagSettings
from ordo.storage.open import init_storage, open_journal, open_stores
from ordo.time import BucketSize, TimeUUID

__all__ = [
    "AppendReceipt",
    "BucketSize",
    "BucketSizeMismatchError",
    "ConcurrencyConflictError",
    "ConfigurationError",
    "EventsByTagSettings",
    "InvalidIdentifierError",
    "InvalidInputError",
    "InvalidSequenceNrError",
    "Journal",
    "NewEvent",
    "OrdoError",
    "PersistedEvent",
    "SchemaVersionError",
    "SerializationError",
    "StorageError",
    "StorageUnavailableError",
    "TimeUUID",
    "init_storage",
    "open_journal",
    "open_stores",
]
