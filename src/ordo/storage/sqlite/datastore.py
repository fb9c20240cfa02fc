"""SQLite connections (one per thread, WAL mode); their errors are ordo's (`driver_errors`)."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import NamedTuple

from ordo.errors import StorageAccessError, StorageUnavailableError, StoresClosedError
from ordo.forking import OpeningProcess
from ordo.storage.file_errors import require_nameable
from ordo.storage.location import (
    refuse_a_file_as_folder,
    refuse_in_memory,
    refuse_unnameable,
    require_folder,
)
from ordo.storage.migration import (
    METADATA_TABLE,
    SCHEMA_VERSION_KEY,
    MigrationReceipt,
    finished,
    migrate,
    stored_version,
)
from ordo.storage.schema_reads import SchemaReads, listed_tables
from ordo.storage.sqlite.driver_errors import (
    IN_MEMORY_REFUSAL,
    refuse_folders_beside,
    translate_sqlite_error,
    unusable_file_error,
)
from ordo.storage.sqlite.file_identity import OpenedFile
from ordo.storage.sqlite.write_transaction import WriteTransaction

logger = logging.getLogger(__name__)

_PACKAGE = "ordo.storage.sqlite"

BUSY_TIMEOUT_S = 60.0
"""How long a writer waits for another process's write lock before failing."""


def _use_wal(conn: sqlite3.Connection) -> None:
    """Switch the file to WAL mode once; it stays so for every later connection.

    The switch needs an exclusive lock and SQLite reports a busy file at once instead of
    waiting, so processes opening a new journal together retry until the busy timeout. A
    database that cannot be in WAL mode at all (`:memory:`: SQLite answers with the mode it
    keeps) is refused: the loop waited for it for ever.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        try:
            kept = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
            continue
        if kept == "memory":
            raise sqlite3.OperationalError(IN_MEMORY_REFUSAL)


class SharedFile(NamedTuple):
    """A SQLite file as another process opens it to read it."""

    uri: str
    path: str
    identity: tuple[int, int] | None
    """The file's (device, inode) when the store opened it."""
    busy_timeout_s: float


class SQLiteDatastore(SchemaReads):
    """Connections to one SQLite file: one per thread, WAL mode, busy timeout.

    WAL lets readers run while one writer writes; several processes may use the same file.
    Writes start with BEGIN IMMEDIATE so that the write lock is taken up front and a
    transaction never fails half-way on a lock upgrade. With `read_only` (for callers that only
    read) the file is neither created nor switched to WAL, so a journal in rollback mode (a
    backup made by `VACUUM INTO`) is left as it is. Its connections are not SQLite's read-only
    ones, which would leave `-wal` and `-shm` files behind after reading a WAL journal.
    Otherwise a missing file is created, but never its folder (`require_folder`), and only by
    the first connection (`_open`). `what` names the database in the error of a file that
    cannot be opened (a capture's "source database").
    After close() every call is refused (StoresClosedError); a call running then ends first
    (`close`). Thread-safe; not picklable, and refused in a forked child (ForkedProcessError:
    SQLite forbids using a connection across a fork).
    """

    MIGRATIONS = _PACKAGE
    TABLE_NAMES = (
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
        "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
    )
    """The database's tables and views, ordo's or not (SQLite's own aside)."""

    def __init__(self, path: Path, *, read_only: bool = False, what: str = "journal") -> None:
        self.path = path
        self.read_only = read_only
        self.what = what
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lent: dict[sqlite3.Connection, int] = {}
        """The connections calls use now, with how many lends each (a call within a call)."""
        self._lock = threading.Lock()
        self._is_closed = False
        self._opener = OpeningProcess(f"the stores of SQLite database {path}")
        self._is_opened = False
        """Whether the file was opened: the connections opened afterwards never create it."""
        self._is_journal = False
        """Whether the file held ordo's metadata table: a connection found it, or migrate()."""
        self._opened: OpenedFile | None = None
        """The file the first connection opened; every later one, and each write, checks it."""
        require_folder(path, what=what)
        refuse_folders_beside(path, what=what)
        self._connect()
        self._is_opened = True
        self._opened = OpenedFile(path)

    def write_transaction(self) -> WriteTransaction:
        """Run one atomic write; driver errors leave as StorageError subclasses.

        A file removed, moved away or replaced since the store opened it is StorageAccessError
        (`refuse_replaced_file`), looked at once the write lock is held. A class, not a
        generator: see `ordo.storage.sqlite.write_transaction` for the interrupt it survives.
        """
        return WriteTransaction(self)

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """Lend this thread's connection for single statements (each its own transaction)."""
        conn = self.lend()
        try:
            yield conn
        except sqlite3.Error as exc:
            raise translate_sqlite_error(exc, self.path) from exc
        finally:
            self.give_back(conn)

    def refuse_replaced_file(self) -> None:
        """StorageAccessError if the path names another file than the one the store opened.

        Looked at once a write holds the lock: the connection would write into the file it has
        open, which no one opens again (`OpenedFile`).
        """
        if self._opened is not None:
            self._opened.refuse_another(doing="write", what=self.what)

    def migrate(self) -> MigrationReceipt:
        """Create or upgrade the schema (idempotent; concurrent callers serialize).

        A current schema is found by a read: the write lock is taken only to migrate.
        """
        with self.connection() as conn:
            done = finished(_PACKAGE, self._schema_version(conn))
        if done is None:
            with self.write_transaction() as conn:
                # SQLite's names ignore case: an application's TOKENS is in tokens' place.
                tables = [name.lower() for name in listed_tables(conn, self.TABLE_NAMES)]
                done = migrate(
                    conn,
                    package=_PACKAGE,
                    current=self._schema_version(conn),
                    param="?",
                    existing=tables,
                    where=f"SQLite {self.what} {self.path}",
                )
        self._is_journal = True
        return done

    def for_another_process(self) -> SharedFile:
        """How another process opens this file to read it (ordo.spark.read_ahead).

        The URI never creates the file, as this store's connections after the first do not;
        the identity is the file's when this store opened it, for the other process to check
        that the path still names that file.
        """
        identity = None if self._opened is None else self._opened.identity
        uri = f"{self.path.resolve().as_uri()}?mode=rw"
        return SharedFile(uri, str(self.path), identity, BUSY_TIMEOUT_S)

    def close(self) -> None:
        """Close every connection this datastore opened, in any thread; later calls are refused.

        A connection a call is using (in another thread) closes when that call's lend ends
        (`give_back`), as PostgreSQL's pool closes a lent connection when it comes back: the
        running statement or transaction ends as it would have, and the call's next use of the
        stores is StoresClosedError. Closing it under the running statement would fail the call
        with a generic StorageError, a MemoryError or a crash of the interpreter, and close()
        would wait for the statement, a busy writer's up to BUSY_TIMEOUT_S. Idempotent. In a
        forked child it does nothing: the connections are the parent's.
        """
        if not self._opener.is_current:
            return
        with self._lock:
            self._is_closed = True
            for conn in self._connections:
                if conn not in self._lent:
                    conn.close()
            self._connections = list(self._lent)
        self._local = threading.local()

    def _schema_version(self, conn: sqlite3.Connection) -> int:
        if not has_table(conn, METADATA_TABLE):
            return 0
        row = conn.execute(
            f"SELECT value FROM {METADATA_TABLE} WHERE key = ?", (SCHEMA_VERSION_KEY,)
        ).fetchone()
        return 0 if row is None else stored_version(row[0])

    def lend(self) -> sqlite3.Connection:
        """The calling thread's connection, lent until `give_back`; close() leaves it to that.

        StoresClosedError when close() came first, even between `_connect` and the lend's
        record (close() then closed the connection). ForkedProcessError in a forked child,
        before the parent's connection (or its lock, which a parent's thread may have held at
        the fork) is touched.
        """
        self._opener.refuse_other()
        conn = self._connect()
        with self._lock:
            self._refuse_if_closed()
            self._lent[conn] = self._lent.get(conn, 0) + 1
        return conn

    def give_back(self, conn: sqlite3.Connection) -> None:
        """End one lend of `conn`; the last after close() closes it."""
        with self._lock:
            lends = self._lent.pop(conn) - 1
            if lends:
                self._lent[conn] = lends
            elif self._is_closed:  # close() left it to this call
                conn.close()
                self._connections.remove(conn)

    def _connect(self) -> sqlite3.Connection:
        """The calling thread's connection, opened on its first call; refused after close().

        close() forgets every thread's connection, so a call after it comes here and is refused
        before the file is opened.
        """
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        self._refuse_if_closed()
        conn = self._open()
        with self._lock:
            if self._is_closed:  # closed while this thread connected
                conn.close()
                self._refuse_if_closed()
            self._connections.append(conn)
        self._local.conn = conn
        return conn

    def _open(self) -> sqlite3.Connection:
        """A new connection to the file, set up; the error saying why there can be none.

        Only the first connection of a store that writes may create the file (SQLite's
        `mode=rwc`): a connection a new thread opens after the file was removed or moved away
        created a new, empty one, on which every read failed as "no such table", a StorageError
        that a tracking processor retried for ever. Every later connection uses `mode=rw`, and
        a file gone since the store opened it is StorageAccessError (`unusable_file_error`).
        So is a file that held ordo's tables when the store opened it (or after it migrated it)
        and holds none now: another SQLite database was put in its place; and another file
        (another journal) in the place of the one the store opened (`OpenedFile`): the store's
        connections would use two files. So is a path that
        can name no file any more (`unnameable`: a symbolic link loop in its place, on which
        `resolve()` raised a RuntimeError that ended the thread).
        """
        doing = f"cannot open SQLite {self.what} {self.path}"
        require_nameable(self.path, doing=doing)
        creates = not (self.read_only or self._is_opened)
        target = self.path if creates else f"{self.path.resolve().as_uri()}?mode=rw"
        conn = None
        try:
            conn = sqlite3.connect(
                target,
                uri=not creates,  # mode=rw: read and write, never create
                isolation_level=None,
                check_same_thread=False,
                timeout=BUSY_TIMEOUT_S,
            )
            if not self.read_only:
                _use_wal(conn)
            conn.execute("PRAGMA synchronous = NORMAL")
            is_journal = has_table(conn, METADATA_TABLE)
        except sqlite3.Error as exc:
            if conn is not None:
                conn.close()
            writes, opened = not self.read_only, self._is_opened
            raise unusable_file_error(doing, self.path, exc, writes=writes, opened=opened) from exc
        if self._is_journal and not is_journal:
            conn.close()
            msg = (
                f"cannot open SQLite {self.what} {self.path}: it has no {METADATA_TABLE} table "
                "any more (another SQLite database was put in its place after it was opened)"
            )
            raise StorageAccessError(msg)
        self._is_journal = self._is_journal or is_journal
        if self._opened is not None:
            try:
                self._opened.refuse_another(doing="open", what=self.what)
            except StorageAccessError:
                conn.close()
                raise
        return conn

    def _refuse_if_closed(self) -> None:
        if self._is_closed:
            msg = f"the stores of SQLite database {self.path} were used after close()"
            raise StoresClosedError(msg)


def require_journal_file(path: Path, *, what: str = "journal") -> None:
    """Refuse a path that is not an ordo journal: no file, or no metadata table in it.

    The file is looked at through a read-only connection: opening it as a journal would
    create a missing file and give an application's database ordo's tables. `what` names the
    database in the messages (a projection's "sink database" is an ordo database too).
    `:memory:` is refused as opening it to write refuses it, not as "no journal at :memory:",
    whose advice to create it with `ordo init` could not be followed.

    What no retry makes a journal (`:memory:`, a folder, a file where a folder of the path
    should be, a file that is no SQLite database, a path that can name no file) is
    StorageAccessError. No file, or no ordo tables in it, is StorageUnavailableError: the
    journal may not be there yet, which `ordo init` or a writer's first open creates (a new
    journal's file is there a moment before its tables), and a program that starts its
    readers first may wait for it.
    """
    refuse_in_memory(path, what=what)
    refuse_unnameable(path, what=what)
    if path.is_dir():  # `ordo init` would not make one of it either
        msg = f"no {what} at {path}: it is a folder, not an SQLite file"
        raise StorageAccessError(msg)
    if not path.is_file():
        refuse_a_file_as_folder(path, what=what)
        hint = (
            "create it with `ordo init` or by appending to it"
            if what == "journal"
            else "is the path misspelt?"
        )
        msg = f"no {what} at {path}: {hint}"
        raise StorageUnavailableError(msg)
    refuse_folders_beside(path, what=what)
    try:
        with closing(read_only_connection(path)) as conn:
            is_journal = has_table(conn, METADATA_TABLE)
    except sqlite3.Error as exc:
        doing = f"cannot read {path} as an SQLite {what}"
        raise unusable_file_error(doing, path, exc, writes=False) from exc
    if not is_journal:
        msg = f"{path} is not an ordo {what} (it has no {METADATA_TABLE} table)"
        raise StorageUnavailableError(msg)


def read_only_connection(path: Path) -> sqlite3.Connection:
    """A connection that can neither create the file nor change it (nor its journal mode)."""
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def has_table(conn: sqlite3.Connection, table: str) -> bool:
    """Whether the database holds `table` (ordo's metadata table: it is a journal)."""
    found = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
    ).fetchone()
    return found is not None
