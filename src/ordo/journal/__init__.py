"""The journal: events per persistence id, with tags, optimistic concurrency and recovery."""

from __future__ import annotations

from ordo.journal.bucket_size import check_bucket_size
from ordo.journal.event import AppendReceipt, NewEvent, PersistedEvent
from ordo.journal.journal import Journal
from ordo.journal.ports import JournalStore
from ordo.journal.serialization import Serializer

__all__ = [
    "AppendReceipt",
    "Journal",
    "JournalStore",
    "NewEvent",
    "PersistedEvent",
    "Serializer",
    "check_bucket_size",
]
