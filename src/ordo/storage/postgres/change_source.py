"""PostgreSQL change capture: a logical replication slot, decoded by wal2json (format version 2).

The capture loop peeks a window of committed transactions, publishes it, and only then advances
the slot (`ChangeSource`). Peeking does not consume, so a crash in between replays the window,
and the publisher drops what the change log already holds. How positions are numbered, and why
they follow commits rather than each change's LSN, is explained in `wal2json.py`. The segment of
every audit is `<slot>.<system identifier>`, unique to the server (`change_segment`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from types import TracebackType

from psycopg import sql
from psycopg.types.string import TextLoader

from ordo.cdc.column_type import ColumnType
from ordo.cdc.mutation import Audit, Mutation, snapshot_segment
from ordo.cdc.ports import CapturedWindow, SourceStatus
from ordo.cdc.schema import TableSchema
from ordo.errors import ConfigurationError, InvalidInputError
from ordo.forking import OpeningProcess
from ordo.interrupts import stops_raising
from ordo.storage.postgres.capture_session import (
    close_locked,
    connect_capture,
    lock_capture,
    translated,
)
from ordo.storage.postgres.captured_tables import CapturedTables
from ordo.storage.postgres.catalog import COLUMN_TYPES, Connection, TableRef, read_logical_type
from ordo.storage.postgres.change_segment import SegmentReplica, capture_segment, no_change_log
from ordo.storage.postgres.connection import redacted_dsn
from ordo.storage.postgres.replication_slot import (
    PLUGIN,
    check_slot,
    check_slot_name,
    confirmed_position,
    create_slot,
    drop_slot,
    slot_status,
)
from ordo.storage.postgres.table_name import split_table_name
from ordo.storage.postgres.wal2json import (
    RowChange,
    decode_window,
    format_lsn,
    position_at,
    row_key,
    row_values,
    value_cells,
)

logger = logging.getLogger(__name__)

SOURCE = "postgresql"
_SNAPSHOT_BATCH = 1000
_PEEK = (
    "SELECT data FROM pg_logical_slot_peek_changes(%s, NULL, %s, 'format-version', '2', "
    "'include-transaction', 'true', 'include-lsn', 'true', 'include-timestamp', 'true', "
    "'include-types', 'true', 'include-type-oids', 'true', "
    "'actions', 'insert,update,delete,truncate', 'add-tables', %s)"
)


class PostgresChangeSource:
    """A `ChangeSource` over one wal2json logical replication slot and the tables it captures.

    `tables` are names as messages carry them: `table` (in the connection's current_schema()),
    `schema.table`, or either with quoted parts (`public."my.table"`, see `split_table_name`;
    ConfigurationError for a malformed one). Constructing one opens nothing; the first call
    opens one autocommit connection, which `close()` (or leaving a `with` block) closes. A call
    after the server ended that session (restart, failover, pg_terminate_backend) fails with
    StorageUnavailableError, and the next one opens a new session. The capture loop owns it:
    not thread-safe, and one consumer per slot: an `exclusive` source holds the slot's capture
    lock on its connection, taken again with each new session (`lock_capture`). Refused in a
    child made by os.fork (ForkedProcessError, before its session is touched), where close()
    does nothing: the session is the parent's. A child's call used it as its own, and its
    close() released the parent's capture lock and ended the parent's session, so another
    capture of the slot could start beside the parent's.

    TRUNCATE is not captured: it is logged as a WARNING and the rows stay in the materialized
    view. Under REPLICA IDENTITY DEFAULT an UPDATE omits the TOASTed columns it did not change
    (the materializer keeps their values); an UPDATE of the primary key becomes a delete of the
    old key and an insert of the new one, which lacks those columns too unless the table has
    REPLICA IDENTITY FULL (a WARNING names them).
    `published_by` tells the server a segment of the capture's change log came from (`name`).
    """

    def __init__(
        self,
        dsn: str,
        *,
        slot: str,
        tables: Sequence[str],
        exclusive: bool = False,
        published_by: SegmentReplica = no_change_log,
    ) -> None:
        check_slot_name(slot)
        if isinstance(tables, str) or not tables or len(set(tables)) != len(tables):
            msg = f"tables must be a non-empty sequence of distinct names, got {tables!r}"
            raise ConfigurationError(msg)
        self._dsn, self._slot, self._tables = dsn, slot, tuple(tables)
        self._captured = CapturedTables(
            slot, {table: split_table_name(table) for table in self._tables}
        )
        self._exclusive = exclusive
        self._opener = OpeningProcess(
            f"the change source of slot {slot!r} on PostgreSQL at {redacted_dsn(dsn)}"
        )
        self._conn: Connection | None = None
        self._backend_pid: int | None = None
        self._types: dict[int, ColumnType | None] = {}
        self._replica = ""
        self._published_by = published_by
        self._segment: str | None = None
        """The audit segment, settled in the first session (it never changes)."""

    @property
    def name(self) -> str:
        """The audit segment of every captured change (`change_segment`), settled once.

        By the first session (opened here if none was): a lost session's warning names it.
        """
        if self._segment is None:
            with self._session():
                pass
        assert self._segment is not None  # noqa: S101 - every session settles it
        return self._segment

    @property
    def slot(self) -> str:
        """The replication slot's name."""
        return self._slot

    def check(self) -> list[TableSchema]:
        """The tables' schemas; refuse what would stop `create`, and create nothing.

        The tables must exist, have a primary key and types the registry maps; the slot must be
        this database's wal2json slot, or the server must be able to create it (wal_level, a free
        slot, a role allowed to replicate). A capture checks so before it opens its journal, so a
        refused source leaves no journal behind. wal2json itself is found only by `create`.
        """
        with self._session() as conn:
            schemas = self._captured.read(conn)
            check_slot(conn, self._slot)
        return schemas

    def create(self) -> None:
        """Create the slot with wal2json; an existing wal2json slot of this database is reused.

        Changes committed from now on are captured. Raises CaptureError for what `check`
        refuses, or when the server lacks the wal2json plugin. Everything is checked first: a
        slot left behind by a refused capture would make the server keep WAL for nobody.
        """
        with self._session() as conn:
            self._captured.read(conn)
            if check_slot(conn, self._slot):
                logger.info("reusing replication slot slot=%s", self._slot)
                return
            create_slot(conn, self._slot)
        logger.info("created replication slot slot=%s plugin=%s", self._slot, PLUGIN)

    def open(self) -> None:
        """Open the session now: an `exclusive` source takes the slot's capture lock with it.

        Reads and changes nothing else, so a capture refused as already running has done
        nothing yet (AlreadyRunningError).
        """
        with self._session():
            pass

    def drop(self) -> None:
        """Drop the slot (nothing happens when it does not exist): the server frees its WAL."""
        with self._session() as conn:
            drop_slot(conn, self._slot)
        logger.info("dropped replication slot slot=%s", self._slot)

    def schemas(self) -> Sequence[TableSchema]:
        """Each captured table's schema as the catalog has it now, in the order given."""
        with self._session() as conn:
            return self._captured.read(conn)

    def snapshot(self, table: str) -> Iterator[Mutation]:
        """The table's current rows, for the initial READ snapshot (primary-key order).

        Each row is a mutation with a row marker and every value column, written at the slot's
        confirmed position (`position_at(confirmed_flush_lsn)`), so every change still
        in the slot is newer. Changes committed after that position but before the read are in
        the snapshot and come from the slot again, later in position: replaying them ends in
        the same rows (a row changed twice in that gap shows its older value in between, until
        the newer change arrives). Each call is its own audit segment
        (`<segment>.snapshot.<start µs>`, positions = row ordinals), so a repeated snapshot is
        published in full. Rows are read on a second connection while iterating.
        """
        with self._session() as conn:
            self._captured.read(conn)
            ref, schema = self._captured.table(table)
            write_time = position_at(confirmed_position(conn, self._slot))
        return self._snapshot_rows(ref, schema, write_time=write_time)

    def peek(self, *, max_changes: int) -> CapturedWindow:
        """Whole committed transactions after the confirmed position, in commit order.

        Stops after the transaction that reaches about `max_changes` decoded rows (wal2json's
        begin and commit rows count too, other tables' transactions too), so a window may hold
        more changes or far fewer; `has_more` says whether it stopped there. `up_to` is the
        commit end LSN of its last transaction (filtered-out ones included), or the confirmed
        position when nothing committed since (past the last message of a full window of
        logical messages alone: `decode_window`). Consumes nothing. Decoded with the tables'
        schemas as last read, or as the catalog has them now if those do not fit
        (`CapturedTables.decoded`).
        """
        if max_changes < 1:
            msg = f"max_changes must be at least 1, got {max_changes}"
            raise InvalidInputError(msg)
        with self._session() as conn:
            tables = self._captured.filter(conn)
            confirmed = confirmed_position(conn, self._slot)
            rows = conn.execute(_PEEK, (self._slot, max_changes, tables)).fetchall()
            window = self._captured.decoded(
                conn,
                lambda schema_of: decode_window(
                    [str(data) for (data,) in rows],
                    confirmed=confirmed,
                    schema_of=schema_of,
                    type_of=lambda oid: self._type_of(conn, oid),
                    audit=self._audit,
                    has_more=len(rows) >= max_changes,
                ),
            )
        logger.debug(
            "peeked slot=%s mutations=%d up_to=%s",
            self._slot,
            len(window.rows),
            format_lsn(window.up_to),
        )
        return window

    def advance(self, *, up_to: int) -> None:
        """Confirm the slot up to `up_to` (inclusive, a window's `up_to`): WAL before it is freed.

        Never moves past `up_to`; a position at or before the confirmed one changes nothing.
        """
        target = format_lsn(up_to)
        with self._session() as conn:
            if up_to <= confirmed_position(conn, self._slot):
                return
            conn.execute("SELECT pg_replication_slot_advance(%s, %s::pg_lsn)", (self._slot, target))
        logger.debug("advanced slot=%s up_to=%s", self._slot, target)

    def status(self) -> SourceStatus:
        """The slot's confirmed position, the server's WAL head, and the WAL kept for the slot.

        The slot does not know its tables (a capture names them on every read): each must be a
        table the capture could take (CaptureError, NoPrimaryKeyError... otherwise).
        """
        with self._session() as conn:
            status = slot_status(conn, self._slot, self._tables, segment=self.name)
            self._captured.read(conn)
        return status

    def close(self) -> None:
        """Close the connection (a later call opens a new one), releasing the capture lock.

        Does nothing in a forked child (the connection and its lock are the parent's).
        """
        if not self._opener.is_current:
            return
        conn, self._conn = self._conn, None
        if conn is not None:
            close_locked(conn)

    def __enter__(self) -> PostgresChangeSource:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @contextmanager
    def _session(self) -> Iterator[Connection]:
        """The session every call runs in; ForkedProcessError in a forked child."""
        self._opener.refuse_other()
        with translated(self._slot):
            if self._conn is None or self._conn.closed:
                self._conn = self._new_session()
            yield self._conn

    def _new_session(self) -> Connection:
        """A connection whose session holds the capture lock when `exclusive`.

        A session that cannot take the lock is closed: a later call must not capture unlocked.
        Ctrl-C or SIGTERM end the connect, the lock and the read of the server's identifier at
        once, also where a command's flag only notes them (`stops_raising`): a capture that lost
        its session connects again within its loop, and against a server that does not answer
        the stop was held for the connect_timeout, or, by a server that stopped answering right
        after the connect, for the session's TCP timeout. Nothing was read or advanced in the
        session yet; what it tells this source is kept once no stop can break into it.
        """
        with stops_raising():
            conn = connect_capture(self._dsn, autocommit=True)
        try:
            with stops_raising():  # a stop noted since the connect raises on entry
                if self._exclusive:
                    lock_capture(conn, self._slot, previous_pid=self._backend_pid)
                row = conn.execute(
                    "SELECT system_identifier::text, pg_backend_pid() FROM pg_control_system()"
                ).fetchone()
            self._replica = "" if row is None else str(row[0])
            self._backend_pid = None if row is None else int(str(row[1]))
            if self._segment is None:
                self._segment = capture_segment(self._slot, self._replica, self._published_by)
        except BaseException:
            conn.close()
            raise
        return conn

    def _type_of(self, conn: Connection, oid: int) -> ColumnType | None:
        """The logical type of a type oid wal2json names (looked up once per oid)."""
        if oid not in self._types:
            self._types[oid] = read_logical_type(conn, oid)
        return self._types[oid]

    def _audit(self, position: int, captured_at_us: int) -> Audit:
        return Audit(
            source=SOURCE,
            replica=self._replica,
            segment=self.name,
            position=position,
            captured_at_us=captured_at_us,
        )

    def _snapshot_rows(
        self, ref: TableRef, schema: TableSchema, *, write_time: int
    ) -> Iterator[Mutation]:
        query = sql.SQL("SELECT {} FROM {}.{} ORDER BY {}").format(
            sql.SQL(", ").join(sql.Identifier(c.name) for c in schema.columns),
            sql.Identifier(ref.schema),
            sql.Identifier(ref.name),
            sql.SQL(", ").join(sql.Identifier(k) for k in schema.partition_key),
        )
        started_us = time.time_ns() // 1000
        segment = snapshot_segment(self.name, started_us)
        names = [column.name for column in schema.columns]
        as_read: list[ColumnType | None] = [None] * len(names)  # the catalog's types
        self._opener.refuse_other()
        # Unwound only in this process: a forked child's copy of a snapshot being read would
        # close the parent's cursor and end its session over their shared socket.
        opened = ExitStack()
        with translated(self._slot):
            try:
                conn = opened.enter_context(connect_capture(self._dsn, autocommit=False))
                cursor = opened.enter_context(conn.cursor(name="ordo_snapshot"))
                for type_name in COLUMN_TYPES:  # every value as its output text, as wal2json
                    if cursor.adapters.types.get(type_name) is not None:
                        cursor.adapters.register_loader(type_name, TextLoader)
                cursor.itersize = _SNAPSHOT_BATCH
                cursor.execute(query)
                for ordinal, raw in enumerate(cursor, start=1):
                    values = row_values(schema, zip(names, raw, as_read, strict=True))
                    change = RowChange(
                        table=ref.given,
                        key=row_key(schema, values),
                        values=value_cells(schema, values),
                    )
                    audit = Audit(
                        source=SOURCE,
                        replica=self._replica,
                        segment=segment,
                        position=ordinal,
                        captured_at_us=started_us,
                    )
                    yield change.mutation(write_time=write_time, audit=audit)
                    self._opener.refuse_other()  # before the cursor reads on in a forked child
            finally:
                if self._opener.is_current:
                    opened.close()
