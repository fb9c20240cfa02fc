"""What tracking processors handled, in SQL: processed positions, handled batches, dead letters.

A part of SqlTokenStore: the batch transaction that writes them with the token (SqlBatch),
and the reads of what it wrote.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager

from ordo.errors import InvalidInputError
from ordo.journal import validation
from ordo.journal.serialization import stored_json
from ordo.processing.ports import DeadLetter
from ordo.storage.sql_batch import SqlBatch
from ordo.storage.sql_token_rows import SqlTokenRows, check_segment
from ordo.types import PersistenceId

PROGRESS_TABLES = ("processed_positions", "handled_batches")
"""What a processor handled, besides its tokens: a reset clears both."""


class SqlProcessedProgress(SqlTokenRows):
    """Batches and the progress they record, of the token store. Thread-safe."""

    def processors_without_tokens(self) -> Mapping[str, int]:
        """The processors with positions or handled batches but no tokens, by name.

        Each with its number of positions (persistence ids): what a reset would clear where a
        Spark projection keeps only those, its own sink, which `processors()` does not list.
        """
        rows = self._fetchall(
            "SELECT p.processor, (SELECT COUNT(*) FROM processed_positions AS c "
            "WHERE c.processor = p.processor) FROM (SELECT processor FROM processed_positions "
            "UNION SELECT processor FROM handled_batches) AS p WHERE NOT EXISTS "
            "(SELECT 1 FROM tokens AS t WHERE t.processor = p.processor) ORDER BY p.processor",
            (),
        )
        return {str(row[0]): int(str(row[1])) for row in rows}

    @contextmanager
    def batch(
        self,
        processor: str,
        segment_id: int,
        owner: str,
        *,
        mask: int | None = None,
        idle_limit_ms: int | None = None,
    ) -> Iterator[SqlBatch]:
        """One batch: handler writes, positions, dead letters and token in one transaction.

        With `mask` (the segment's as its events were read) the token is stored only while the
        segment still has that mask: after a split or merge under a lapsed claim, a worker
        still reading the old segment must not move the new one's token. With `idle_limit_ms`
        a batch whose process stalls that long between two statements is ended (see _write).
        """
        check_segment(processor, segment_id, owner)
        if mask is not None:
            validation.integer(mask, name="mask")
        if idle_limit_ms is not None:
            validation.integer(idle_limit_ms, name="idle_limit_ms", minimum=1)
        with self._write(idle_limit_ms) as conn:
            batch = SqlBatch(self, conn, processor, segment_id)
            yield batch
            batch.commit(owner, mask=mask)

    def dead_letters(self, processor: str) -> Sequence[DeadLetter]:
        """The processor's dead letters, oldest first."""
        validation.processor_name(processor)
        rows = self._fetchall(
            "SELECT persistence_id, sequence_nr, position, event_offset, error FROM dead_letters "
            "WHERE processor = {p} ORDER BY id",
            (processor,),
        )
        return [
            DeadLetter(
                persistence_id=PersistenceId(str(r[0])),
                sequence_nr=int(r[1]),
                position=int(r[2]),
                offset_key=bytes(r[3]),
                error=str(r[4]),
            )
            for r in rows
        ]

    def positions(self, processor: str) -> Mapping[PersistenceId, int]:
        """The last processed position of every persistence id."""
        validation.processor_name(processor)
        rows = self._fetchall(
            "SELECT persistence_id, position FROM processed_positions WHERE processor = {p}",
            (processor,),
        )
        return {PersistenceId(str(r[0])): int(r[1]) for r in rows}

    def handled(
        self, processor: str, *, after: bytes, up_to: bytes
    ) -> AbstractSet[tuple[PersistenceId, int]]:
        """The events recorded as handled by batches between these offset keys."""
        validation.processor_name(processor)
        _check_offset_key(after, name="after")
        _check_offset_key(up_to, name="up_to")
        rows = self._fetchall(
            "SELECT events FROM handled_batches WHERE processor = {p} AND last_offset > {p} "
            "AND first_offset <= {p}",
            (processor, after, up_to),
        )
        of = f"a handled batch of processor {processor!r}"  # a damaged one ended a claim
        return {
            (PersistenceId(pid), int(position))
            for (events,) in rows
            for pid, position in stored_json(str(events), what="event list", of=of)
        }

    def forget_handled(self, processor: str, segment_id: int, owner: str, *, before: bytes) -> None:
        """Drop the records of batches whose last offset key is below `before`, while held.

        Only while `owner` holds the segment still (see TokenStore.forget_handled). The check
        is in the DELETE: on PostgreSQL the statement reads the claim and the records in one
        snapshot, so a reset committed before it leaves the claim gone (nothing goes), and the
        records written after such a reset are not in it.
        """
        check_segment(processor, segment_id, owner)
        _check_offset_key(before, name="before")
        with self._write() as conn:
            conn.execute(
                self._sql(
                    "DELETE FROM handled_batches WHERE processor = {p} AND last_offset < {p} "
                    "AND EXISTS (SELECT 1 FROM tokens WHERE processor = {p} "
                    "AND segment_id = {p} AND owner = {p})"
                ),
                (processor, before, processor, segment_id, owner),
            )


def _check_offset_key(value: object, *, name: str) -> None:
    if not isinstance(value, bytes):
        msg = f"{name} must be an offset key (bytes), got {type(value).__name__}"
        raise InvalidInputError(msg)
