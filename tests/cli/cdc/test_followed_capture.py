"""`ordo cdc capture --follow` in a process of its own: Ctrl-C, a second capture of one
source, and a PostgreSQL source's lost session, refused role and server that stops answering.
"""

from __future__ import annotations

import os
import secrets
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from cdc_cli_support import one_line_error, run_ordo
from ordo.storage.parquet import ParquetChangeLog
from ordo.storage.postgres.change_source import PostgresChangeSource
from postgres_source_support import fresh_slot
from processing_support import wait_for
from stalling_proxy_support import StallingProxy


def test_ctrl_c_ends_a_followed_capture_with_one_line_and_status_130(
    tmp_path: Path, journal: str
) -> None:
    source = tmp_path / "shop.db"
    with sqlite3.connect(source) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)")
    args = ["cdc", "capture", str(source), "--table", "items", "--journal", journal]
    args += ["--change-log", str(tmp_path / "log")]
    assert run_ordo(*args)[0] == 0  # installs the triggers: the next change is captured
    capture = _started(*args, "--follow", "--flush-interval-ms", "50")
    try:
        with sqlite3.connect(source) as conn:
            conn.execute("INSERT INTO items VALUES (1, 'x')")
        assert capture.stderr is not None
        assert capture.stderr.readline().startswith("capturing: published items=1")
        _interrupt(capture)
    finally:
        capture.kill()
        capture.wait()


def test_sigterm_ends_a_followed_capture_as_ctrl_c_does_with_status_143(
    request: pytest.FixtureRequest, tmp_path: Path, journal: str
) -> None:
    """What a service manager stops a capture with. It ended the capture at once, without a
    word, and left the source's lock file `<source>-ordo-capture.lock` behind."""
    source, insert, _ = _capture_source(request, tmp_path, "sqlite")
    args = ["cdc", "capture", *source, "--table", "items", "--journal", journal]
    args += ["--change-log", str(tmp_path / "log")]
    assert run_ordo(*args)[0] == 0  # installs the triggers: the next change is captured
    with _following(args, insert) as capture:
        capture.send_signal(signal.SIGTERM)
        out, err = capture.communicate(timeout=30)

    assert (capture.returncode, out, err) == (
        128 + signal.SIGTERM,
        "",
        "capture interrupted; everything published is durable\n",
    )
    assert list(tmp_path.glob("*.lock")) == []


def _started(*args: str) -> subprocess.Popen[str]:
    """`ordo ARGS` in a process of its own, which prints its threads' stacks on SIGABRT.

    It inherits the environment, PYTHONPATH included.
    """
    return subprocess.Popen(
        [sys.executable, "-m", "ordo.cli.main", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
    )


def _interrupt(capture: subprocess.Popen[str]) -> None:
    """Ctrl-C the capture: it must end with its one line and status 130 within 30 s."""
    capture.send_signal(signal.SIGINT)
    try:
        out, err = capture.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        # Seen once in a full CI run (not reproduced alone): show where every thread of the
        # capture was (faulthandler prints them on SIGABRT) instead of only the timeout.
        capture.send_signal(signal.SIGABRT)
        _, err = capture.communicate()
        pytest.fail(f"the capture did not end within 30 s of Ctrl-C; its threads:\n{err}")
    assert (capture.returncode, out, err) == (
        130,
        "",
        "capture interrupted; everything published is durable\n",
    )


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_a_second_capture_of_a_source_is_refused_while_the_first_runs(
    request: pytest.FixtureRequest, tmp_path: Path, journal: str, backend: str
) -> None:
    """Two captures of one source peeked the same changes and both published them.

    Seen with two `--follow` captures of 300 inserts: 355 mutations in the log (SQLite), and 312
    (PostgreSQL) before one of them failed with `StorageUnavailableError: PostgreSQL is
    unavailable: replication slot ... is active for PID N`. The second is refused at once now.
    """
    source, insert, refused = _capture_source(request, tmp_path, backend)
    log = tmp_path / "log"
    args = ["cdc", "capture", *source, "--table", "items", "--journal", journal]
    args += ["--change-log", str(log)]
    assert run_ordo(*args)[0] == 0  # installs the triggers or creates the slot
    with _following(args, insert) as first:
        code, out, err = run_ordo(*args)
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=30)
    one_line_error(code, err, f"AlreadyRunningError: {refused} (")
    assert f"pid {first.pid} on " in err
    assert out == ""
    positions = [m.audit.position for m in ParquetChangeLog(log).read("items")]
    assert len(positions) == 1


@contextmanager
def _following(args: list[str], insert: Callable[[int], None]) -> Iterator[subprocess.Popen[str]]:
    """`ordo` with `args` and `--follow` running, once it published a first insert; killed after.

    The process inherits the environment, PYTHONPATH included.
    """
    capture = subprocess.Popen(
        [sys.executable, "-m", "ordo.cli.main", *args, "--follow", "--flush-interval-ms", "50"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        insert(1)
        assert capture.stderr is not None
        assert capture.stderr.readline().startswith("capturing: published items=1")
        yield capture
    finally:
        capture.kill()
        capture.wait()


def _capture_source(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> tuple[list[str], Callable[[int], None], str]:
    """A source with an empty `items` table: its arguments (URL, slot), an insert of a row, and
    what a second capture is refused as."""
    if backend == "sqlite":
        path = tmp_path / "shop.db"
        with closing(sqlite3.connect(path)) as conn, conn:
            conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY)")

        def insert_row(key: int) -> None:
            with closing(sqlite3.connect(path)) as conn, conn:
                conn.execute("INSERT INTO items VALUES (?)", (key,))

        return [str(path)], insert_row, f"a capture of {path} is already running"
    dsn: str = request.getfixturevalue("postgres_dsn")
    slot = fresh_slot()
    with psycopg.connect(dsn, autocommit=True) as pg:
        pg.execute("CREATE TABLE items (id BIGINT PRIMARY KEY)")

    def insert_committed(key: int) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SET synchronous_commit = on")  # decodable at once
            conn.execute("INSERT INTO items VALUES (%s)", (key,))

    def drop_slot() -> None:
        with PostgresChangeSource(dsn, slot=slot, tables=["items"]) as source:
            source.drop()

    request.addfinalizer(drop_slot)
    return [dsn, "--slot", slot], insert_committed, f"a capture of slot {slot!r} is already running"


@pytest.mark.postgres
def test_a_followed_capture_rides_out_the_end_of_its_session(
    request: pytest.FixtureRequest, tmp_path: Path, journal: str
) -> None:
    """`ordo cdc capture --follow` stopped with `Error: StorageUnavailableError: PostgreSQL is
    unavailable: terminating connection due to administrator command`."""
    source, insert, _ = _capture_source(request, tmp_path, "postgres")
    name = f"ordo-test-{secrets.token_hex(4)}"  # the capture's sessions, its lock's included
    url = f"{source[0]}&application_name={name}"
    log = tmp_path / "log"
    args = ["cdc", "capture", url, *source[1:], "--table", "items", "--journal", journal]
    args += ["--change-log", str(log)]
    assert run_ordo(*args)[0] == 0  # creates the slot: the next change is captured
    with _following(args, insert) as capture:
        with psycopg.connect(source[0], autocommit=True) as conn:
            ended = conn.execute(
                "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
                "WHERE application_name = %s OR application_name LIKE %s",
                (name, f"ordo cdc capture pid {capture.pid} on %"),
            ).fetchone()
        assert ended is not None
        assert ended[0] >= 1
        insert(2)
        insert(3)
        # A reconnect in another process: slow but certain on a loaded machine.
        wait_for(
            lambda: len(list(ParquetChangeLog(log).read("items"))) >= 3,
            what="the capture to log the changes after its session",
        )
        capture.send_signal(signal.SIGINT)
        _, err = capture.communicate(timeout=30)
    assert capture.returncode == 130, err
    assert "WARNING ordo.cdc.capture: capture unavailable, retrying in 0.1 s (attempt 1" in err
    assert _logged_keys(log) == [(1,), (2,), (3,)]


def _logged_keys(log: Path) -> list[tuple[object, ...]]:
    """The keys of the `items` changes in the change log at `log`, in the source's order."""
    logged = sorted(ParquetChangeLog(log).read("items"), key=lambda m: m.audit.position)
    return [m.partition_key for m in logged]


@pytest.mark.postgres
def test_a_followed_capture_ends_at_once_when_the_server_refuses_its_url(
    postgres_server_dsn: str, tmp_path: Path, journal: str
) -> None:
    """It retried a role that may no longer log in as an outage, for --reconnect-timeout-ms.

    The role of its own captures a table in its own schema; made NOLOGIN with its sessions
    ended, the capture's next session is refused: one line and exit status 1, within seconds
    of a reconnect timeout of ten minutes.
    """
    name = f"r_{secrets.token_hex(6)}"
    slot = fresh_slot()
    admin = psycopg.connect(postgres_server_dsn, autocommit=True)
    role = sql.Identifier(name)
    admin.execute(sql.SQL("CREATE ROLE {} LOGIN REPLICATION").format(role))
    admin.execute(sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(role, role))
    parts = urlsplit(postgres_server_dsn)
    url = urlunsplit(
        parts._replace(
            netloc=f"{name}@{parts.hostname}:{parts.port}",
            query=f"options=-csearch_path%3D{name}",
        )
    )
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE items (id BIGINT PRIMARY KEY)")

        def insert(key: int) -> None:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("INSERT INTO items VALUES (%s)", (key,))

        args = ["cdc", "capture", url, "--slot", slot, "--table", "items", "--journal", journal]
        args += ["--change-log", str(tmp_path / "log"), "--reconnect-timeout-ms", "600000"]
        assert run_ordo(*args)[0] == 0  # creates the slot: the next change is captured
        with _following(args, insert) as capture:
            admin.execute(sql.SQL("ALTER ROLE {} NOLOGIN").format(role))
            admin.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE usename = %s",
                (name,),
            )
            _, err = capture.communicate(timeout=30)
        assert capture.returncode == 1, err
        last = err.splitlines()[-1]
        assert last.startswith("Error: StorageAccessError: PostgreSQL at ")
        assert "refuses the connection" in last
        assert err.count("retrying in") <= 1  # the session in flight was lost as in an outage
    finally:
        admin.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
        admin.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(role))
        admin.execute(sql.SQL("DROP ROLE {}").format(role))
        admin.close()


@pytest.mark.postgres
def test_ctrl_c_during_a_snapshot_ends_the_capture_with_one_line_and_status_130(
    request: pytest.FixtureRequest, tmp_path: Path, journal: str
) -> None:
    """Ctrl-C while `--snapshot` read a table ended with click's `Aborted!` and status 1."""
    source, _, _ = _capture_source(request, tmp_path, "postgres")
    args = ["cdc", "capture", *source, "--table", "items", "--journal", journal]
    args += ["--change-log", str(tmp_path / "log")]
    assert run_ordo(*args)[0] == 0  # creates the slot
    with psycopg.connect(source[0]) as locker:
        locker.execute("LOCK TABLE items IN ACCESS EXCLUSIVE MODE")  # the snapshot's read waits
        capture = _started(*args, "--snapshot", "--follow")
        try:
            wait_for(
                lambda: _waits_for_a_lock(source[0], "%ordo_snapshot%"),
                what="the snapshot's read to wait for the lock",
                process=capture,
            )
            _interrupt(capture)
        finally:
            capture.kill()
            capture.wait()


def _waits_for_a_lock(dsn: str, query: str) -> bool:
    """Whether a session of the database at `dsn` running a statement like `query` waits for a
    lock."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query LIKE %s AND pid <> pg_backend_pid()",
            (query,),
        ).fetchone()
    return row is not None and int(row[0]) > 0


_SILENT_CONNECT_TIMEOUT_S = 30
"""The connect_timeout of a URL whose server stops answering: how long a held stop waits."""


@pytest.mark.postgres
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_a_followed_capture_stopped_while_it_reconnects_to_a_silent_server_ends_at_once(
    request: pytest.FixtureRequest, tmp_path: Path, journal: str, stop: signal.Signals
) -> None:
    """Ctrl-C or SIGTERM only set the capture's flag while it connected again after losing its
    session: behind a dropped route or on a frozen host, whose server does not answer, the stop
    was held until the connect timed out (connect_timeout, 10 s by default), then took effect."""
    source, insert, _ = _capture_source(request, tmp_path, "postgres")
    proxy = StallingProxy(source[0])
    request.addfinalizer(proxy.close)
    url = f"{proxy.url}&connect_timeout={_SILENT_CONNECT_TIMEOUT_S}"
    args = ["cdc", "capture", url, *source[1:], "--table", "items", "--journal", journal]
    args += ["--change-log", str(tmp_path / "log")]
    assert run_ordo(*args)[0] == 0  # creates the slot: the next change is captured
    with _following(args, insert) as capture:
        proxy.stop_answering()  # ends the capture's session
        wait_for(
            lambda: proxy.unanswered,
            what="the capture to connect again after losing its session",
            process=capture,
        )
        capture.send_signal(stop)
        # held, the stop would wait out the connect_timeout: half of it is plenty
        out, err = capture.communicate(timeout=_SILENT_CONNECT_TIMEOUT_S / 2)

    assert (capture.returncode, out) == (128 + stop, ""), err
    assert "Traceback" not in err
    assert err.splitlines()[-1] == "capture interrupted; everything published is durable"


_POOL_WAIT_S = 30
"""How long a call waits for a connection of a journal's pool (`POOL_TIMEOUT_S`), and the
connect_timeout of its URL: how long a held stop waits on a journal that stops answering."""


@pytest.mark.postgres
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_a_followed_capture_stopped_while_its_journal_is_silent_ends_at_once(
    request: pytest.FixtureRequest, postgres_dsn: str, tmp_path: Path, stop: signal.Signals
) -> None:
    """Each window registers its schemas in the journal's registry: on a PostgreSQL journal that
    stopped answering the registration waited for a pool connection (30 s) with Ctrl-C or
    SIGTERM only noted in the capture's flag, and the stop was held that long. The window that
    could not register is neither published nor advanced: the next capture publishes it."""
    proxy = StallingProxy(postgres_dsn)
    request.addfinalizer(proxy.close)
    source, insert, _ = _capture_source(request, tmp_path, "sqlite")
    args = ["cdc", "capture", *source, "--table", "items", "--change-log", str(tmp_path / "log")]
    journal = ["--journal", f"{proxy.url}&connect_timeout={_POOL_WAIT_S}"]
    assert run_ordo(*args, *journal)[0] == 0  # installs the triggers
    with _following([*args, *journal], insert) as capture:
        proxy.stop_answering()  # ends the pool's sessions
        insert(2)
        wait_for(
            lambda: proxy.unanswered, what="the journal's pool to connect again", process=capture
        )
        capture.send_signal(stop)
        # held, the stop would wait out the pool's wait: half of it is plenty
        out, err = capture.communicate(timeout=_POOL_WAIT_S / 2)

    assert (capture.returncode, out, err) == (
        128 + stop,
        "",
        "capture interrupted; everything published is durable\n",
    )
    assert run_ordo(*args, "--journal", postgres_dsn)[0] == 0  # publishes what was not
    assert _logged_keys(tmp_path / "log") == [(1,), (2,)]


@pytest.mark.postgres
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_a_followed_capture_stopped_while_its_new_session_is_silent_ends_at_once(
    request: pytest.FixtureRequest, tmp_path: Path, journal: str, stop: signal.Signals
) -> None:
    """After a lost session the capture connects again, then takes its lock and reads the
    server's identifier: a server that stopped answering right after the connect held Ctrl-C or
    SIGTERM until the session's TCP timeout (30 s), for ever behind a host that still
    acknowledges what is sent (this proxy), and then for 10 s: psycopg took the stop for Ctrl-C
    and cancelled the lock's statement, waiting 5 s for the cancel and 5 s for the statement's
    end, on a server that answers neither. Nothing was read or advanced in that session."""
    source, insert, _ = _capture_source(request, tmp_path, "postgres")
    proxy = StallingProxy(source[0])
    request.addfinalizer(proxy.close)
    log = tmp_path / "log"
    args = ["cdc", "capture", "--table", "items", "--journal", journal, "--change-log", str(log)]
    assert run_ordo(*args, proxy.url, *source[1:])[0] == 0  # creates the slot
    with _following([*args, proxy.url, *source[1:]], insert) as capture:
        proxy.freeze_at(b"pg_try_advisory_lock(")  # the new session's lock
        with psycopg.connect(source[0], autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                "WHERE application_name LIKE %s",
                (f"ordo cdc capture pid {capture.pid} on %",),
            )
        wait_for(proxy.is_frozen, what="the capture's new session to ask for its lock")
        insert(2)
        capture.send_signal(stop)
        # held, the stop would wait out the session's TCP timeout: half of it is plenty
        out, err = capture.communicate(timeout=_SILENT_CONNECT_TIMEOUT_S / 2)

    assert (capture.returncode, out) == (128 + stop, ""), err
    assert "Traceback" not in err
    assert "cancellation" not in err, err  # psycopg's, of the session's lock
    assert err.splitlines()[-1] == "capture interrupted; everything published is durable"
    assert run_ordo(*args, *source)[0] == 0  # publishes what was not
    assert _logged_keys(log) == [(1,), (2,)]


@pytest.mark.postgres
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("held_in", ["the journal's open", "the first registration"])
def test_a_capture_stopped_before_it_captures_ends_with_one_line(
    request: pytest.FixtureRequest,
    postgres_dsn: str,
    tmp_path: Path,
    stop: signal.Signals,
    held_in: str,
) -> None:
    """The command opens its journal and registers the tables' schemas before it captures: a
    stop while a PostgreSQL journal did not answer (a connect waits out its connect_timeout) or
    the registration waited for a lock of the registry ended with click's `Aborted!` and status
    1 (Ctrl-C), or at once by SIGTERM's default action, which left the source's lock file
    behind. Nothing of the source was prepared yet: it has no triggers."""
    proxy = StallingProxy(postgres_dsn)
    request.addfinalizer(proxy.close)
    source, _, _ = _capture_source(request, tmp_path, "sqlite")
    log = tmp_path / "log"
    args = ["cdc", "capture", *source, "--table", "items", "--change-log", str(log)]
    journal = f"{proxy.url}&connect_timeout={_POOL_WAIT_S}"
    opening = held_in == "the journal's open"
    with psycopg.connect(postgres_dsn) as locker:
        if opening:
            proxy.stop_answering()
        else:
            assert run_ordo("init", "--journal", postgres_dsn)[0] == 0
            locker.execute("LOCK TABLE cdc_schemas IN ACCESS EXCLUSIVE MODE")
        capture = _started(*args, "--journal", journal)

        def is_held() -> object:
            return proxy.unanswered if opening else _waits_for_a_lock(postgres_dsn, "%cdc_schemas%")

        try:
            wait_for(is_held, what=f"the capture to wait in {held_in}", process=capture)
            capture.send_signal(stop)
            # held, the stop would wait out the connect (the lock for ever): half of it is plenty
            out, err = capture.communicate(timeout=_POOL_WAIT_S / 2)
        finally:
            capture.kill()
            capture.wait()

    assert (capture.returncode, out, err) == (
        128 + stop,
        "",
        "capture interrupted; everything published is durable\n",
    )
    assert list(tmp_path.glob("*.lock")) == []
    with closing(sqlite3.connect(source[0])) as conn:
        assert conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'trigger'"
        ).fetchone() == (0,)
    assert _logged_keys(log) == []
