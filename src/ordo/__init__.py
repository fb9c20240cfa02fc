"""ordo: ordered, resumable event pipelines — events by tag, segments, contiguous acks, CDC.

The names below the errors are imported on first use: every module of ordo imports this
package first, and Spark starts fresh Python processes that import one module of ordo each
(a streaming source, a stateful step's planning), which need neither the journal nor its
stores; loading them there cost about 0.1 s per process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
from ordo.lazy_names import lazy_names as _lazy_names

if TYPE_CHECKING:
    from ordo.journal import AppendReceipt, Journal, NewEvent, PersistedEvent
    from ordo.query import NO_OFFSET, EventEnvelope, EventsByTag
    from ordo.settings import EventsByTagSettings, QuerySettings
    from ordo.storage.open import events_by_tag_at, init_storage, open_journal, open_stores
    from ordo.time import BucketSize, TimeUUID

_MODULES = {
    **dict.fromkeys(("AppendReceipt", "Journal", "NewEvent", "PersistedEvent"), "ordo.journal"),
    **dict.fromkeys(("NO_OFFSET", "EventEnvelope", "EventsByTag"), "ordo.query"),
    **dict.fromkeys(("EventsByTagSettings", "QuerySettings"), "ordo.settings"),
    **dict.fromkeys(
        ("events_by_tag_at", "init_storage", "open_journal", "open_stores"), "ordo.storage.open"
    ),
    **dict.fromkeys(("BucketSize", "TimeUUID"), "ordo.time"),
}
"""Where each public name other than the errors lives."""

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


__getattr__ = _lazy_names(__name__, _MODULES)
