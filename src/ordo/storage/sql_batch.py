"""One batch of a tracking processor in SQL: handler writes, progress and token, one transaction."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

from ordo.errors import StorageUnavailableError, UnableToClaimTokenError
from ordo.processing.connection import SqlConnection
from ordo.processing.ports import DeadLetter
from ordo.processing.token import TrackingToken
from ordo.storage.sql_store import SqlStore
from ordo.types import PersistenceId

_POSITIONS_PER_STATEMENT = 1_000
"""Rows of one positions upsert (3,000 parameters) or ids of one read, within SQLite's and
PostgreSQL's limits."""


class SqlBatch:
    """The BatchTransaction of SqlTokenStore; lives inside one write transaction."""

    def __init__(
        self, store: SqlStore, conn: SqlConnection, processor: str, segment_id: int
    ) -> None:
        self._store, self._conn = store, conn
        self._processor, self._segment_id = processor, segment_id
        self._positions: dict[PersistenceId, int] = {}
        self._handled: list[tuple[PersistenceId, int, bytes]] = []
        self._token: TrackingToken | None = None

    @property
    def connection(self) -> SqlConnection:
        """The transaction's connection: handler writes through it commit with the token."""
        return self._conn

    @property
    def placeholder(self) -> str:
        """The driver's parameter placeholder."""
        return self._store.PARAM

    def positions(self, persistence_ids: Iterable[PersistenceId]) -> Mapping[PersistenceId, int]:
        """Last processed positions, including those recorded in this batch.

        Read in statements of _POSITIONS_PER_STATEMENT ids: one IN list of every id failed a
        projection's segment with more persistence ids in a micro-batch than the driver takes
        parameters (PostgreSQL 65,535), as an outage that every retry met again.
        """
        wanted = sorted(set(persistence_ids) - set(self._positions))
        found: dict[PersistenceId, int] = {}
        for start in range(0, len(wanted), _POSITIONS_PER_STATEMENT):
            chunk = wanted[start : start + _POSITIONS_PER_STATEMENT]
            marks = ", ".join(["{p}"] * len(chunk))
            rows = self._conn.execute(
                self._store._sql(
                    "SELECT persistence_id, position FROM processed_positions "
                    f"WHERE processor = {{p}} AND persistence_id IN ({marks})"
                ),
                (self._processor, *chunk),
            ).fetchall()
            found.update((PersistenceId(str(r[0])), int(r[1])) for r in rows)
        found.update(self._positions)
        return found

    def record(self, persistence_id: PersistenceId, position: int) -> None:
        """Mark a position processed (stored at commit)."""
        self._positions[persistence_id] = max(position, self._positions.get(persistence_id, 0))

    def record_handled(
        self, persistence_id: PersistenceId, position: int, offset_key: bytes
    ) -> None:
        """Record one event as handled (stored at commit)."""
        self._handled.append((persistence_id, position, offset_key))

    def dead_letter(self, letter: DeadLetter) -> None:
        """Keep a failed event with its error."""
        self._conn.execute(
            self._store._sql(
                "INSERT INTO dead_letters (processor, segment_id, persistence_id, sequence_nr, "
                "position, event_offset, error, failed_at) VALUES "
                "({p}, {p}, {p}, {p}, {p}, {p}, {p}, {p})"
            ),
            (
                self._processor,
                self._segment_id,
                letter.persistence_id,
                letter.sequence_nr,
                letter.position,
                letter.offset_key,
                letter.error,
                0,
            ),
        )

    def store_token(self, token: TrackingToken) -> None:
        """The segment's token after this batch."""
        self._token = token

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """SAVEPOINT around one handler call, so a retry or a skip undoes only its writes.

        The savepoint's own statements fail only when the transaction is lost (its session
        ended): StorageUnavailableError then says it is the batch's failure, not the handler's,
        so that the batch is rolled back and claimed again instead of retried and given to
        error_mode (which stopped a processor whose session ended in a careful rerun).
        """
        self._own("SAVEPOINT ordo_event")
        try:
            yield
        except BaseException:
            self._own("ROLLBACK TO SAVEPOINT ordo_event")
            self._own("RELEASE SAVEPOINT ordo_event")
            raise
        self._own("RELEASE SAVEPOINT ordo_event")

    def _own(self, statement: str) -> None:
        """Run one of the batch's own statements; any failure means the transaction is lost."""
        try:
            self._conn.execute(statement)
        except Exception as exc:  # the driver's error: sqlite3's or psycopg's
            msg = f"the batch's transaction is lost: {exc}"
            raise StorageUnavailableError(msg) from exc

    def commit(self, owner: str, *, mask: int | None = None) -> None:
        """Write the token, positions and handled events, unless the claim was lost.

        A lost claim raises UnableToClaimTokenError, which rolls the whole batch back. The
        token row goes first: a reset locks the processor's token rows before it deletes the
        positions and handled batches, so a batch that wrote its positions first and then
        waited for its token row (the reset of a processor whose claim had expired mid-batch)
        held a position the reset waited for, a deadlock PostgreSQL ended one of them for.
        Positions go in as few statements as the drivers' parameter limits allow (a round trip
        per persistence id cost PostgreSQL most of a batch), in persistence id order, so that
        two batches touching the same rows lock them in one order; handled events as one row.
        """
        self._store_token(owner, mask)
        sql = self._store._sql
        ordered = sorted(self._positions.items())
        for start in range(0, len(ordered), _POSITIONS_PER_STATEMENT):
            chunk = ordered[start : start + _POSITIONS_PER_STATEMENT]
            self._conn.execute(
                sql(
                    "INSERT INTO processed_positions (processor, persistence_id, position) "
                    f"VALUES {', '.join(['({p}, {p}, {p})'] * len(chunk))} "
                    "ON CONFLICT (processor, persistence_id) DO UPDATE "
                    "SET position = excluded.position "
                    "WHERE excluded.position > processed_positions.position"
                ),
                [value for pid, position in chunk for value in (self._processor, pid, position)],
            )
        if self._handled:
            offsets = [offset_key for _, _, offset_key in self._handled]
            self._conn.execute(
                sql(
                    "INSERT INTO handled_batches (processor, last_offset, first_offset, events) "
                    "VALUES ({p}, {p}, {p}, {p})"
                ),
                (
                    self._processor,
                    max(offsets),
                    min(offsets),
                    json.dumps([[pid, position] for pid, position, _ in self._handled]),
                ),
            )

    def _store_token(self, owner: str, mask: int | None) -> None:
        """Update the token row, if a token was stored, while `owner` holds it (with `mask`)."""
        if self._token is None:
            return
        same_mask = "" if mask is None else " AND mask = {p}"
        updated = self._conn.execute(
            self._store._sql(
                "UPDATE tokens SET token = {p} WHERE processor = {p} AND segment_id = {p} "
                f"AND owner = {{p}}{same_mask}"
            ),
            (self._token.to_json(), self._processor, self._segment_id, owner)
            + (() if mask is None else (mask,)),
        ).rowcount
        if not updated:
            also = "" if mask is None else f" with mask {mask}"
            msg = (
                f"processor {self._processor!r} segment {self._segment_id}{also} is no longer "
                f"claimed by {owner!r}; the batch is rolled back"
            )
            raise UnableToClaimTokenError(msg)
