from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from ordo import (
    MissingFolderError,
    NewEvent,
    SchemaVersionError,
    StorageAccessError,
    StorageUnavailableError,
    init_storage,
    open_journal,
    open_stores,
)
from ordo.errors import ConfigurationError, StoresClosedError, UnknownUrlSchemeError
from ordo.storage.location import (
    PostgresLocation,
    SQLiteLocation,
    file_as_folder,
    parse_location,
)
from ordo.storage.migration import load_migrations
from ordo.storage.open import OpenMode, stores_at
from ordo.storage.sqlite.datastore import SQLiteDatastore, require_journal_file
from ordo.storage.sqlite.driver_errors import translate_sqlite_error
from ordo.storage.sqlite.token_store import SQLiteTokenStore

LATEST = load_migrations("ordo.storage.sqlite")[-1].version


def test_the_journal_file_is_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    init_storage(f"sqlite:///{path}")
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_open_journal_refuses_a_missing_folder_and_init_storage_creates_it(
    tmp_path: Path,
) -> None:
    """open_journal created the folders of a misspelt path: a tree with a new, empty journal
    in it, where the commands that write and sqlite3 refuse one."""
    path = tmp_path / "a" / "b" / "j.db"
    with pytest.raises(MissingFolderError) as refused:
        open_journal(str(path))
    assert str(refused.value) == (
        f"no journal at {path}: no folder {tmp_path}/a/b "
        "(`ordo init` or ordo.init_storage() creates both)"
    )
    assert (refused.value.path, refused.value.folder) == (path, tmp_path / "a" / "b")
    assert list(tmp_path.iterdir()) == []

    init_storage(str(path))
    with open_journal(str(path)) as journal:
        journal.append("p", [NewEvent.of(1)])
    assert path.exists()


@pytest.mark.parametrize("mode", ["migrate", "write", "read"])
@pytest.mark.parametrize("opener", [open_stores, stores_at])
def test_opening_stores_in_a_missing_folder_is_refused_and_creates_nothing(
    tmp_path: Path, mode: OpenMode, opener: Callable[..., object]
) -> None:
    """open_stores created the folders of any path it was asked to write: a misspelt `--sink`
    or the API's open_stores became a tree with a new, empty database in it."""
    path = tmp_path / "typo" / "deeper" / "j.db"
    with pytest.raises(MissingFolderError) as refused:
        opener(str(path), mode=mode)
    assert (refused.value.path, refused.value.folder) == (path, path.parent)
    assert not (tmp_path / "typo").exists()


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
@pytest.mark.parametrize("read_only", [False, True])
def test_a_folder_where_sqlite_keeps_a_file_beside_the_database_is_refused(
    tmp_path: Path, read_only: bool, suffix: str
) -> None:
    """SQLite failed later and elsewhere: "unable to open database file", "disk I/O error", or
    (`-shm`) a write refused as "attempt to write a readonly database".

    StorageAccessError: as StorageUnavailableError, an outage, code that rides out outages (a
    live query, a processor, a capture) retried what only removing the folder mends.
    """
    path = tmp_path / "j.db"
    init_storage(str(path))
    before = path.read_bytes()
    beside = Path(f"{path}{suffix}")
    beside.mkdir()
    problem = f"^cannot open SQLite journal {path}: {beside} is a folder, not the {suffix} file "
    with pytest.raises(StorageAccessError, match=problem):
        SQLiteDatastore(path, read_only=read_only)
    with pytest.raises(StorageAccessError, match=problem):
        require_journal_file(path)
    assert path.read_bytes() == before


def test_a_folder_made_beside_a_journal_being_read_is_no_outage(tmp_path: Path) -> None:
    """A `-journal` folder made beside a journal in rollback mode (a `VACUUM INTO` backup) once
    it is open fails its reads with "disk I/O error": it was StorageUnavailableError, which a
    live query retries for ever. Nothing is written."""
    path = tmp_path / "backup.db"
    init_storage(str(tmp_path / "j.db"))
    with closing(sqlite3.connect(tmp_path / "j.db")) as conn:
        conn.execute("VACUUM INTO ?", (str(path),))
    before = path.read_bytes()
    with stores_at(str(path), mode="read") as stores:
        assert stores.schema_version() == LATEST
        beside = Path(f"{path}-journal")
        beside.mkdir()
        with pytest.raises(StorageAccessError) as refused:
            stores.schema_version()
    assert str(refused.value) == (
        f"SQLite database {path} cannot be used: disk I/O error "
        f"({beside} is a folder, not the -journal file SQLite keeps beside it)"
    )
    assert path.read_bytes() == before


def test_init_storage_creates_the_missing_folders_and_the_journal(tmp_path: Path) -> None:
    """The one opening of storage that creates folders: what `ordo init` runs."""
    path = tmp_path / "a" / "b" / "j.db"
    receipt = init_storage(f"sqlite:///{path}")
    assert (receipt.previous_version, receipt.version) == (0, LATEST)
    with stores_at(f"sqlite:///{path}", mode="read") as stores:
        assert stores.schema_version() == LATEST


def test_a_rejected_init_storage_creates_no_folder(tmp_path: Path) -> None:
    path = tmp_path / "a" / "j.db"
    with pytest.raises(ConfigurationError, match="bucket_size"):
        init_storage(str(path), bucket_size="fortnight")  # type: ignore[arg-type]
    with pytest.raises(
        ConfigurationError,
        match=r"^bucket_size must be one of BucketSize's members or values \(minute, hour, "
        r"day\), got 24$",
    ):
        init_storage(str(path), bucket_size=24)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_a_file_that_is_not_a_database_is_no_outage(tmp_path: Path) -> None:
    """It was StorageUnavailableError, which code that rides out outages retries for ever."""
    path = tmp_path / "notes.txt"
    path.write_text("hello, this is not SQLite\n" * 100, encoding="utf-8")
    problem = r"notes\.txt.*: file is not a database$"
    with pytest.raises(StorageAccessError, match=problem):
        open_stores(str(path))
    with pytest.raises(StorageAccessError, match=problem):
        require_journal_file(path)
    assert path.read_text(encoding="utf-8").startswith("hello")


def test_a_journal_that_may_not_be_there_yet_is_unavailable_not_refused(tmp_path: Path) -> None:
    """No file, or a file without ordo's tables (a new journal's, a moment before its writer
    creates them): `ordo init` or a writer's first open makes it a journal, so it is no
    StorageAccessError, which says that nothing but an operator mends it."""
    missing, bare = tmp_path / "missing.db", tmp_path / "bare.db"
    with closing(sqlite3.connect(bare)) as conn:
        conn.execute("VACUUM")  # an SQLite file without tables
    for path, problem in [(missing, "no journal at"), (bare, "is not an ordo journal")]:
        with pytest.raises(StorageUnavailableError, match=problem) as raised:
            require_journal_file(path)
        assert not isinstance(raised.value, StorageAccessError)


def test_a_journal_of_a_newer_schema_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    init_storage(str(path))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE ordo_metadata SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(SchemaVersionError) as caught:
        open_stores(str(path))
    assert (caught.value.found, caught.value.supported) == (99, LATEST)
    with sqlite3.connect(path) as conn:
        version = conn.execute(
            "SELECT value FROM ordo_metadata WHERE key = 'schema_version'"
        ).fetchone()
    assert version == ("99",)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:///rel/j.db", SQLiteLocation(path=Path("rel/j.db"))),
        ("sqlite:////abs/j.db", SQLiteLocation(path=Path("/abs/j.db"))),
        ("j.db", SQLiteLocation(path=Path("j.db"))),
        ("postgresql://u@h:5/db", PostgresLocation(dsn="postgresql://u@h:5/db")),
        ("postgres://u@h/db", PostgresLocation(dsn="postgres://u@h/db")),
        ("host=h port=5 dbname=db", PostgresLocation(dsn="host=h port=5 dbname=db")),
        (" dbname = db", PostgresLocation(dsn=" dbname = db")),
        ("hostname=x.db", SQLiteLocation(path=Path("hostname=x.db"))),
    ],
)
def test_journal_urls(url: str, expected: object) -> None:
    assert parse_location(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        "",
        "   ",
        "sqlite://",
        "sqlite://host/j.db",
        "postgresql://[h/db",
        "sqlite://[/j.db",
        "sqlite:///a\x00.db",  # a ValueError ("embedded null byte") from opening the file
        "postgresql://h/d\x00b",
    ],
)
def test_malformed_urls_are_configuration_errors(url: str) -> None:
    with pytest.raises(ConfigurationError):
        parse_location(url)


def test_an_sqlite_url_with_a_query_string_is_refused_creating_nothing(tmp_path: Path) -> None:
    """`?timeout=30`, as SQLAlchemy's URLs take it, was read as part of the file name: init and
    the first append made a new, empty journal `j.db?timeout=30` beside the one meant."""
    with pytest.raises(ConfigurationError, match=r"no query string \('\?timeout=30'\)"):
        init_storage(f"sqlite:///{tmp_path}/j.db?timeout=30")
    assert list(tmp_path.iterdir()) == []
    assert parse_location(f"{tmp_path}/j.db?x") == SQLiteLocation(path=tmp_path / "j.db?x")


def test_a_file_as_folder_is_the_nearest_existing_part_of_a_path_when_it_is_a_file(
    tmp_path: Path,
) -> None:
    (tmp_path / "notes").write_text("", encoding="utf-8")
    assert file_as_folder(tmp_path / "notes" / "j.db") == tmp_path / "notes"
    assert file_as_folder(tmp_path / "notes" / "a" / "b" / "j.db") == tmp_path / "notes"
    assert file_as_folder(tmp_path / "missing" / "j.db") is None  # tmp_path is a folder
    assert file_as_folder(tmp_path / "j.db") is None


def test_an_unknown_open_mode_is_refused_before_anything_is_created(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    with pytest.raises(ConfigurationError, match="migrate, write, read; got 'rw'"):
        open_stores(str(path), mode="rw")  # type: ignore[arg-type]
    assert not path.exists()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sqlite:/j.db", r"SQLite URL 'sqlite:/j.db' must look like sqlite:///relative.db"),
        ("sqlite:j.db", r"SQLite URL 'sqlite:j.db' must look like sqlite:///relative.db"),
        ("SQLite:/a/j.db", r"SQLite URL 'SQLite:/a/j.db' must look like"),
        ("postgresql:/h/db", r"PostgreSQL URL 'postgresql:/h/db' must look like postgresql://"),
        ("postgres:h/db", r"PostgreSQL URL 'postgres:h/db' must look like postgresql://"),
    ],
)
def test_a_url_short_of_its_slashes_is_refused_creating_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, message: str
) -> None:
    """`sqlite:/j.db`, one slash short, was read as a plain path: `ordo init` made a folder
    `sqlite:` with a new, empty journal in it (and `postgresql:/h/db` one in `postgresql:/h`),
    where `sqlite://j.db` is refused. A file whose name starts so is given as `./sqlite:j.db`."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match=message):
        init_storage(url)
    assert list(tmp_path.iterdir()) == []
    assert parse_location("./sqlite:j.db") == SQLiteLocation(path=Path("sqlite:j.db"))


def test_an_unknown_scheme_names_the_valid_ones() -> None:
    with pytest.raises(UnknownUrlSchemeError, match="sqlite, postgresql, postgres"):
        parse_location("mysql://u@h/db")


@pytest.mark.parametrize("attempt", range(3))
def test_processes_opening_a_new_journal_together_all_succeed(tmp_path: Path, attempt: int) -> None:
    path = tmp_path / f"fresh-{attempt}.db"
    script = (
        "import sys\n"
        "from ordo import NewEvent, open_journal\n"
        "with open_journal(sys.argv[1]) as journal:\n"
        "    journal.append(sys.argv[2], [NewEvent.of(1, tags=['t'])] * 5)\n"
    )
    children = [
        subprocess.Popen([sys.executable, "-c", script, str(path), f"p{i}"]) for i in range(10)
    ]
    assert [child.wait(timeout=60) for child in children] == [0] * 10
    with open_journal(str(path)) as journal:
        assert sorted(journal.persistence_ids()) == sorted(f"p{i}" for i in range(10))


def test_opening_a_current_journal_does_not_wait_for_a_writer(tmp_path: Path) -> None:
    """Projection tasks open their sink every batch; busy writers must not hold them up."""
    path = tmp_path / "j.db"
    init_storage(f"sqlite:///{path}")
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # a writer in the middle of a transaction
    opened: list[object] = []
    try:
        opening = threading.Thread(target=lambda: opened.append(open_stores(f"sqlite:///{path}")))
        opening.start()
        opening.join(10)  # the busy timeout is 60 s
        assert opened, "opening the journal waited for the writer's lock"
    finally:
        writer.execute("ROLLBACK")
        writer.close()
        opening.join()
        for stores in opened:
            stores.close()  # type: ignore[attr-defined]


def test_closed_stores_open_no_connection_even_in_another_thread(tmp_path: Path) -> None:
    """A call after close() opened a new connection that nothing closed: here it created the
    removed file again, from a thread that had never used the stores.
    """
    path = tmp_path / "j.db"
    stores = open_stores(f"sqlite:///{path}")
    stores.close()
    for name in ("j.db", "j.db-wal", "j.db-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    raised: list[BaseException] = []

    def read() -> None:
        try:
            stores.schema_version()
        except StoresClosedError as exc:
            raised.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    reader.join()

    assert len(raised) == 1
    assert str(path) in str(raised[0])
    assert list(tmp_path.iterdir()) == []


def test_a_call_running_when_the_stores_close_ends_with_stores_closed_error(
    tmp_path: Path,
) -> None:
    """close() from another thread closed the connection under the running statement: the call
    failed with a generic StorageError, or worse (MemoryError, a crash of the interpreter).

    Now the call's transaction ends as it would have, its connection closes after it, and its
    next use of the stores (initialize reads the segments back) raises StoresClosedError, as
    on PostgreSQL, whose pool closes a lent connection when it comes back. The call is held in
    its first insert by a function its connection's temporary trigger calls.
    """
    datastore = SQLiteDatastore(tmp_path / "j.db")
    datastore.migrate()
    tokens = SQLiteTokenStore(datastore)
    inserting, closed = threading.Event(), threading.Event()
    raised: list[BaseException] = []

    def hold() -> None:
        inserting.set()
        closed.wait()

    def initialize() -> None:
        with datastore.connection() as conn:  # this thread's connection, lent to its calls
            conn.create_function("hold", 0, hold)
            conn.execute("CREATE TEMP TRIGGER held AFTER INSERT ON tokens BEGIN SELECT hold(); END")
        try:
            tokens.initialize("running", segment_count=2)
        except BaseException as exc:
            raised.append(exc)

    caller = threading.Thread(target=initialize)
    caller.start()
    inserting.wait()
    closer = threading.Thread(target=datastore.close)  # the old close() waited for the insert
    closer.start()
    closer.join(timeout=30)
    is_closed_while_running = not closer.is_alive()
    closed.set()
    caller.join()
    closer.join()

    assert is_closed_while_running
    assert [type(exc) for exc in raised] == [StoresClosedError]
    with stores_at(f"sqlite:///{tmp_path / 'j.db'}", mode="read") as reopened:
        assert len(reopened.tokens.entries("running")) == 2  # its transaction committed


def test_a_database_locked_past_the_busy_timeout_is_an_outage(tmp_path: Path) -> None:
    """Another process's write lock held past the busy timeout (here none) was a plain
    StorageError, which a tracking processor would stop on: the lock passes."""
    path = tmp_path / "j.db"
    init_storage(str(path))
    with (
        closing(sqlite3.connect(path, isolation_level=None)) as holder,
        closing(sqlite3.connect(path, isolation_level=None, timeout=0)) as waiter,
    ):
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(sqlite3.OperationalError) as locked:
            waiter.execute("BEGIN IMMEDIATE")
    error = translate_sqlite_error(locked.value, path)
    assert isinstance(error, StorageUnavailableError)
    assert not isinstance(error, StorageAccessError)
    assert str(error) == f"SQLite database {path} cannot be used now: database is locked"
