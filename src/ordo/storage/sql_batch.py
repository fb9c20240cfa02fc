"""One batch of a tracking processor in SQL: handler writes, progress and token, one transaction."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager

from ordo.errors import StorageUnavailableError, UnableToClaimTokenError
from ordo.processing.connection import SqlConnection
from ordo.processing.ports import DeadLetter
from ordo.processing.token import TrackingToken
from ordo.storage.chunks import chunks
from ordo.storage.sql_token_rows import SqlTokenRows
from ordo.types import PersistenceId

_POSITIONS_PER_STATEMENT = 1_000
"""Rows of one positions upsert (3,000 parameters) or ids of one read, within SQLite's and
PostgreSQL's limits."""
_RESERVED = 0
"""The position of a row a batch reserved when it read an id with none (SqlBatch._reserve):
never committed (the batch writes the id's position over it, or deletes it), so no other
transaction reads it."""


class SqlBatch:
    """The BatchTransaction of SqlTokenStore; lives inside one write transaction."""

    def __init__(
        self, store: SqlTokenRows, conn: SqlConnection, processor: str, segment_id: int
    ) -> None:
        self._store, self._conn = store, conn
        self._processor, self._segment_id = processor, segment_id
        self._positions: dict[PersistenceId, int] = {}
        self._reserved: set[PersistenceId] = set()
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

        On PostgreSQL the ids' rows stay locked until the batch ends, so that two batches at
        the same ids at once (a Spark projection's attempts: one run twice, a speculative task;
        no claim keeps them apart) take turns: under READ COMMITTED both read the positions
        before either committed, and both applied the events (the later position write did
        nothing, its handler's writes stood). A stored row is read FOR UPDATE; an id without
        one gets a row reserved first (_reserve), which the other batch's insert waits for.
        The waiting batch then reads what the first committed and skips it. Locked in
        persistence id order, reserved rows first, as the reset locks them: batches wait for
        each other, never in a cycle, while each reads its positions once. A tracking
        processor's batch then writes its token row at commit, after its positions, while a
        reset locks token rows first: a reset while a batch whose claim lapsed was running can
        deadlock with it, and PostgreSQL rolls one back (TransactionConflictError, nothing of
        it written): a reset may be retried; a batch is rolled back as if its claim was lost,
        and its events are handled again from the reset's token. SQLite's writers take turns
        (the batch's transaction began IMMEDIATE): nothing to lock.

        Read in statements of _POSITIONS_PER_STATEMENT ids: one IN list of every id failed a
        projection's segment with more persistence ids in a micro-batch than the driver takes
        parameters (PostgreSQL 65,535), as an outage that every retry met again.
        """
        wanted = sorted(set(persistence_ids) - self._positions.keys() - self._reserved)
        lock = self._store.LOCK_ROWS
        found: dict[PersistenceId, int] = {}
        for chunk in chunks(wanted, _POSITIONS_PER_STATEMENT):
            if lock:
                reserved = self._reserve(chunk)
                chunk = [pid for pid in chunk if pid not in reserved]
            if not chunk:
                continue
            marks = ", ".join(["{p}"] * len(chunk))
            rows = self._conn.execute(
                self._store._sql(
                    "SELECT persistence_id, position FROM processed_positions "
                    f"WHERE processor = {{p}} AND persistence_id IN ({marks}) "
                    f"ORDER BY persistence_id{lock}"
                ),
                (self._processor, *chunk),
            ).fetchall()
            found.update((PersistenceId(str(r[0])), int(r[1])) for r in rows)
        found.update(self._positions)
        return found

    def _reserve(self, persistence_ids: Sequence[PersistenceId]) -> set[PersistenceId]:
        """Insert a reserved row for each of the ids without a stored position; those ids.

        A row that does not exist cannot be locked: this one, uncommitted, makes another
        batch's insert of the id wait until this batch has ended (and then do nothing, the id
        having its position). Stored ids are left as they are: their rows are locked by the
        read that follows, which the reserved ones need not (they are this batch's own).
        """
        marks = ", ".join([f"({{p}}, {{p}}, {_RESERVED})"] * len(persistence_ids))
        inserted = self._conn.execute(
            self._store._sql(
                "INSERT INTO processed_positions (processor, persistence_id, position) "
                f"VALUES {marks} ON CONFLICT (processor, persistence_id) DO NOTHING "
                "RETURNING persistence_id"
            ),
            [value for pid in persistence_ids for value in (self._processor, pid)],
        ).fetchall()
        reserved = {PersistenceId(str(row[0])) for row in inserted}
        self._reserved |= reserved
        return reserved

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
        held a position the reset waited for, a deadlock PostgreSQL ended one of them for
        (the positions a batch read are locked before, at the read: `positions` says what
        comes of a reset then).
        Positions go in as few statements as the drivers' parameter limits allow (a round trip
        per persistence id cost PostgreSQL most of a batch), in persistence id order, so that
        two batches touching the same rows lock them in one order; handled events as one row.
        Rows reserved for ids read but not recorded (events a tracking processor skipped) go.
        """
        self._store_token(owner, mask)
        sql = self._store._sql
        self._drop_unrecorded_reservations()
        ordered = sorted(self._positions.items())
        for chunk in chunks(ordered, _POSITIONS_PER_STATEMENT):
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

    def _drop_unrecorded_reservations(self) -> None:
        """Delete the rows reserved for ids read but not recorded: none may be committed."""
        unrecorded = sorted(self._reserved - self._positions.keys())
        for ids in chunks(unrecorded, _POSITIONS_PER_STATEMENT):
            self._conn.execute(
                self._store._sql(
                    "DELETE FROM processed_positions WHERE processor = {p} AND persistence_id "
                    f"IN ({', '.join(['{p}'] * len(ids))})"
                ),
                (self._processor, *ids),
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
