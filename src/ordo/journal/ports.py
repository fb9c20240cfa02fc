"""What the journal needs from storage; backends under ordo.storage implement it."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from ordo.journal.event import PersistedEvent
from ordo.types import PersistenceId, SequenceNr


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalSummary:
    """Counts over the whole journal (for `ordo info`)."""

    events: int
    persistence_ids: int
    bucket_size: str | None
    schema_version: int
    journal_id: str | None


class JournalStore(Protocol):
    """The `messages` table and the per-journal metadata. Implementations are thread-safe."""

    def write_events(
        self, events: Sequence[PersistedEvent], *, expected_sequence_nr: SequenceNr
    ) -> None:
        """Insert events of one persistence id atomically, all or none.

        Raises ConcurrencyConflictError (naming expected and actual) when any of their
        sequence nrs is taken: another writer appended first.
        """
        ...

    def highest_sequence_nr(self, persistence_id: PersistenceId) -> SequenceNr:
        """The highest sequence nr ever written for the id (deleted ones count), 0 if none."""
        ...

    def read_events(
        self,
        persistence_id: PersistenceId,
        *,
        from_sequence_nr: SequenceNr,
        to_sequence_nr: SequenceNr,
    ) -> Iterator[PersistedEvent]:
        """Events of the id with from <= sequence_nr <= to (both inclusive), ascending, paged."""
        ...

    def persistence_ids(self) -> Iterator[PersistenceId]:
        """Every persistence id that was ever appended to, in id order."""
        ...

    def delete_events(self, persistence_id: PersistenceId, *, to_sequence_nr: SequenceNr) -> int:
        """Delete the id's events up to `to_sequence_nr` (inclusive); returns how many.

        The highest sequence nr is kept, so numbers are never reused. Tag views are untouched.
        """
        ...

    def record_bucket_size(self, bucket_size: str) -> str:
        """Record the bucket size if none is recorded yet; return the recorded one."""
        ...

    def recorded_bucket_size(self) -> str | None:
        """The bucket size recorded by `init_storage` or the first write, or None while none is."""
        ...

    def journal_id(self) -> str | None:
        """The random id recorded when the schema was created or upgraded; None before that."""
        ...

    def summary(self) -> JournalSummary:
        """Count events and persistence ids (full scans: for tools, not hot paths)."""
        ...

    def renew_writer_lease(
        self,
        writer_uuid: str,
        persistence_ids: Collection[PersistenceId],
        *,
        started_at_ms: int,
        now_ms: int,
    ) -> None:
        """Create or renew the writer's lease at `now_ms`, adding the persistence ids it started.

        Called by the journal's heartbeat thread every few seconds, never per append. The
        operations tools refuse to change persistence ids that a live lease covers.
        """
        ...

    def release_writer_lease(self, writer_uuid: str) -> None:
        """Delete the writer's lease and its persistence ids (the journal closed cleanly)."""
        ...
