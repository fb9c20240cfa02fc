"""PostgreSQL objects whose server stops answering: a connect attempt then lasts its timeout.

A server that is refused is told at once; one behind a dropped route, a stopped host or a full
accept queue is not: a connect waits up to CONNECT_TIMEOUT_S (10 s). Here a TCP proxy stands
between the objects and the throwaway server (`StallingProxy`); `stop_answering()` ends the
sessions through it and leaves every later connection accepted but unanswered.
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import psycopg
import pytest
from click.testing import CliRunner

from ordo import Journal, NewEvent, open_journal
from ordo.cli.root import cli
from ordo.errors import StorageUnavailableError, StoresClosedError
from ordo.processing import TrackingProcessor
from ordo.storage.open import open_stores, stores_at
from ordo.storage.postgres import datastore
from ordo.storage.postgres.change_source import PostgresChangeSource
from ordo.storage.postgres.notification import PostgresTagListener
from ordo.tagging.notification import TagNotifier
from processing_support import FAST, WRITE, counting_handler, source, wait_for
from stalling_proxy_support import StallingProxy

pytestmark = pytest.mark.postgres

POOL_WAIT_S = 0.5
"""The pool's wait for a connection (30 s) in the live query's outage: a connect to the local
server takes milliseconds, so only the outage waits it out."""


@pytest.fixture
def proxy(postgres_dsn: str) -> Iterator[StallingProxy]:
    opened = StallingProxy(postgres_dsn)
    yield opened
    opened.close()


def _is_closed_by_peer(sock: socket.socket) -> bool:
    """Whether the other end closed `sock` (what it sent, then end of file, within 5 s)."""
    sock.settimeout(5)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    return True


def _is_open(sock: socket.socket) -> bool:
    """Whether the other end has not closed `sock` yet (what it sent is read, without waiting)."""
    sock.setblocking(False)
    try:
        while sock.recv(65536):
            pass
    except BlockingIOError:
        return True
    return False


def test_closing_the_tag_listener_during_a_reconnect_is_prompt_and_leaves_nothing_open(
    proxy: StallingProxy,
) -> None:
    """close() waited for the connect attempt: up to CONNECT_TIMEOUT_S (10 s)."""
    listener = PostgresTagListener(proxy.url, TagNotifier())
    assert proxy.accepted.acquire(timeout=30)
    proxy.stop_answering()
    assert proxy.accepted.acquire(timeout=30)  # the listener's reconnect, unanswered
    started = time.monotonic()
    listener.close()
    assert time.monotonic() - started < 5
    listener.close()  # idempotent
    assert not [t for t in threading.enumerate() if t.name == "ordo-tag-listener"]
    assert _is_closed_by_peer(proxy.unanswered[0])


_CLOSE_AND_EXIT = """
import atexit, gc, sys
from ordo.storage.postgres import connection
from ordo.storage.postgres.notification import PostgresTagListener
from ordo.tagging.notification import TagNotifier

# It gives up after 2 s: a loaded machine could take that long between the connect and the
# test's look at its socket, which then told nothing of whether the exit waited for it.
connection.DIAGNOSIS_CONNECT_TIMEOUT_S = 60

def held() -> None:
    # Exit handlers run once the interpreter joined the threads an exit waits for. A connect
    # that gave up keeps its socket until its exception is collected: collect it, so that the
    # socket tells whether the diagnosis is still under way.
    gc.collect()
    print("exiting", flush=True)
    sys.stdin.readline()

listener = PostgresTagListener(sys.argv[1], TagNotifier())
print("listening", flush=True)
sys.stdin.readline()
listener.close()
atexit.register(held)
"""
"""Opens a tag listener on the URL given, closes it when told to, then exits: held at its exit
handlers until told to go on. Its diagnosis connects wait 60 s: an exit that waits for one
prints "exiting" only once the test's look at the connect's socket finds it closed."""


def test_a_tag_listener_closed_while_it_asks_why_a_connect_failed_does_not_hold_up_the_exit(
    proxy: StallingProxy,
) -> None:
    """The diagnosis connect ran in the loop's default executor, whose threads the interpreter
    joins at exit: the process ended only once that connect gave up, 2 s later (60 s here)."""
    with subprocess.Popen(
        [sys.executable, "-c", _CLOSE_AND_EXIT, proxy.url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdout is not None
        assert child.stdin is not None
        try:
            assert child.stdout.readline() == "listening\n"
            assert proxy.accepted.acquire(timeout=30)  # the listener's connection
            proxy.stop_answering()
            assert proxy.accepted.acquire(timeout=30)  # the listener's reconnect
            proxy.unanswered[0].close()  # fails at once: the listener asks why
            assert proxy.accepted.acquire(timeout=30)  # the diagnosis connect, unanswered
            child.stdin.write("\n")
            child.stdin.flush()
            assert child.stdout.readline() == "exiting\n"
            assert _is_open(proxy.unanswered[1])  # still connecting: the exit did not wait
            child.stdin.write("\n")
            child.stdin.flush()
            assert child.wait(timeout=30) == 0
        finally:
            child.kill()


def test_a_tag_listener_that_cannot_connect_is_unavailable() -> None:
    """The driver's OperationalError left `events_by_tag_at` untranslated: a traceback."""
    with pytest.raises(StorageUnavailableError, match="Connection refused"):
        PostgresTagListener("postgresql://nobody@127.0.0.1:1/none", TagNotifier())


def test_closing_the_stores_while_the_pool_connects_to_a_server_that_does_not_answer_is_prompt(
    proxy: StallingProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """close() waited 5 s for each connect attempt in flight (about 9.5 s for the two here).
    The attempts it gives up end by themselves once the server refuses them. psycopg_pool's
    WARNING that it could not stop their threads reached library users; it is DEBUG now. The
    read waiting for a connection is failed as StoresClosedError, not as an outage.
    """
    caplog.set_level(logging.WARNING, logger="psycopg.pool")  # a CLI test may have raised it
    caplog.set_level(logging.DEBUG, logger="ordo.storage.postgres.datastore")  # the handler too
    before = set(threading.enumerate())
    stores = open_stores(proxy.url)
    proxy.stop_answering()
    failures: list[Exception] = []

    def read() -> None:  # finds the session ended, and waits for the pool's new connection
        try:
            stores.schema_version()
        except StoresClosedError as exc:
            failures.append(exc)

    reading = threading.Thread(target=read)
    reading.start()
    # the pool replaces the connection it found ended, and grows for the waiting read
    wait_for(lambda: len(proxy.unanswered) == 2)
    started = time.monotonic()
    stores.close()
    assert time.monotonic() - started < 2
    warned = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert not [r for r in warned if "couldn't stop thread" in r.getMessage()]
    assert "left a pool thread to end its call alone" in caplog.text
    reading.join(timeout=30)
    assert len(failures) == 1
    assert "were used after close()" in str(failures[0])
    proxy.answer_again()  # the attempts given up fail now
    wait_for(lambda: set(threading.enumerate()) <= before)


def test_closing_a_capture_source_whose_server_stopped_answering_is_prompt(
    proxy: StallingProxy, postgres_dsn: str
) -> None:
    """Closing releases the capture lock first, and waited for the server's answer: up to the
    session's tcp_user_timeout (30 s) on a frozen host, for ever behind a proxy (Ctrl-C on
    `ordo cdc capture` hung). The lock then goes with the session's backend.
    """
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, v int)")
    capture = PostgresChangeSource(proxy.url, slot="ordo_frozen", tables=["items"], exclusive=True)
    capture.check()  # its session takes the capture lock
    proxy.freeze()
    closing = threading.Thread(target=capture.close, daemon=True)
    closing.start()
    closing.join(timeout=5)
    assert not closing.is_alive()


def test_opening_waits_for_the_pool_as_long_as_the_urls_connect_timeout(
    proxy: StallingProxy,
) -> None:
    """The server answers the first connect, not the pool's: the open waited a fixed 10 s."""
    proxy.answer_only(1)
    started = time.monotonic()
    with pytest.raises(StorageUnavailableError, match="connection timeout expired"):
        open_stores(proxy.url + "&connect_timeout=2")  # after its search_path
    assert time.monotonic() - started < 5  # 2 s, and at most 2 s more to say why


def test_opening_on_a_server_that_does_not_answer_follows_the_urls_connect_timeout() -> None:
    """1 s waits 2 s: psycopg and libpq wait at least that long."""
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never answers
        url = f"postgresql://nobody@127.0.0.1:{silent.getsockname()[1]}/none?connect_timeout=1"
        started = time.monotonic()
        with pytest.raises(StorageUnavailableError, match="connection timeout expired"):
            open_stores(url)
    assert time.monotonic() - started < 3.5


def test_opening_on_a_refused_port_fails_at_once() -> None:
    started = time.monotonic()
    with pytest.raises(StorageUnavailableError, match="Connection refused"):
        open_stores("postgresql://nobody@127.0.0.1:1/none?connect_timeout=1")
    assert time.monotonic() - started < 1


def test_stopping_a_processor_while_the_server_does_not_answer_is_prompt(
    proxy: StallingProxy, postgres_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """stop() waited out the pool's 30 s timeout in the call in flight, then again in releasing
    the claims: about a minute. The claims it could not release expire after the claim timeout,
    and the processor that claims the segments next handles what was not committed, once.
    """
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE counts (pid TEXT PRIMARY KEY, n INT, last INT, replays INT)")
    settings = replace(FAST, thread_count=2, initial_segment_count=2)
    with open_journal(postgres_dsn, settings=WRITE) as journal:  # not through the proxy
        _append_one_each(journal)
        with stores_at(proxy.url) as stores:
            processor = TrackingProcessor(
                "counts", source(stores), stores.tokens, counting_handler, settings=settings
            )
            processor.start()
            wait_for(lambda: _counts(postgres_dsn) == dict.fromkeys(_PIDS, 1))
            proxy.stop_answering()
            _append_one_each(journal)
            time.sleep(0.5)  # the threads' next calls wait for a connection
            started = time.monotonic()
            processor.stop()
            lasted = time.monotonic() - started
            assert not [t for t in threading.enumerate() if t.name.startswith("ordo-counts-")]
            proxy.close()  # the pool's connect attempts fail: closing it waits for none
        assert lasted < 10
        assert "the claim expires after the claim timeout (2 s)" in caplog.text
        with (
            stores_at(postgres_dsn) as stores,
            TrackingProcessor(
                "counts", source(stores), stores.tokens, counting_handler, settings=settings
            ),
        ):
            wait_for(lambda: _counts(postgres_dsn) == dict.fromkeys(_PIDS, 2))


def test_a_processor_rides_out_an_outage_longer_than_the_pools_wait(
    proxy: StallingProxy,
    postgres_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A call that waited out the pool asks why (as a refusal stops the processor): a server
    that does not answer is an outage, retried until it is back, and nothing is lost.
    """
    monkeypatch.setattr(datastore, "POOL_TIMEOUT_S", 1.0)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE counts (pid TEXT PRIMARY KEY, n INT, last INT, replays INT)")
    settings = replace(FAST, thread_count=2, initial_segment_count=2)
    with open_journal(postgres_dsn, settings=WRITE) as journal:  # not through the proxy
        _append_one_each(journal)
        with (
            stores_at(proxy.url) as stores,
            TrackingProcessor(
                "counts", source(stores), stores.tokens, counting_handler, settings=settings
            ) as processor,
        ):
            wait_for(lambda: _counts(postgres_dsn) == dict.fromkeys(_PIDS, 1))
            proxy.stop_answering()
            _append_one_each(journal)
            wait_for(lambda: "cannot connect to PostgreSQL" in caplog.text)  # a call gave up
            proxy.answer_again()
            wait_for(lambda: _counts(postgres_dsn) == dict.fromkeys(_PIDS, 2))
            assert processor.is_running
        assert processor.failure is None


_PIDS = [f"p{i}" for i in range(4)]


def _append_one_each(journal: Journal) -> None:
    for pid in _PIDS:
        journal.append(pid, [NewEvent.of({}, tags=["t"])])
    journal.flush()


def _counts(dsn: str) -> dict[str, int]:
    """The events `counting_handler` committed, per persistence id."""
    with psycopg.connect(dsn) as conn:
        return {str(pid): int(n) for pid, n in conn.execute("SELECT pid, n FROM counts")}


def test_a_live_query_on_the_command_line_reads_on_after_an_outage(
    proxy: StallingProxy,
    postgres_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`ordo query --live` ended with StorageUnavailableError once the pool's wait ran out
    (30 s, POOL_WAIT_S here). It prints each event once and in order: those written before, during
    and after the outage.
    """
    monkeypatch.setattr(datastore, "POOL_TIMEOUT_S", POOL_WAIT_S)
    monkeypatch.setenv("ORDO_FIRST_TIME_BUCKET", WRITE.first_time_bucket)
    monkeypatch.setenv("ORDO_EVENTUAL_CONSISTENCY_DELAY_MS", "100")
    monkeypatch.setenv("ORDO_REFRESH_INTERVAL_MS", "50")
    caplog.set_level(logging.INFO, logger="ordo")
    with open_journal(postgres_dsn, settings=WRITE) as journal:  # not through the proxy

        def append(i: int) -> None:
            journal.append("a", [NewEvent.of({"i": i}, tags=["t"])])
            journal.flush()

        def outage() -> None:
            assert proxy.accepted.acquire(timeout=30)  # the command has opened the journal
            time.sleep(1)
            proxy.stop_answering()
            append(2)
            time.sleep(2.5 * POOL_WAIT_S)  # more than the pool's wait: reads fail twice
            proxy.answer_again()
            append(3)

        append(1)
        thread = threading.Thread(target=outage)
        thread.start()
        result = CliRunner().invoke(
            cli, ["query", "t", "--journal", proxy.url, "--live", "--limit", "3", "--json"]
        )
        thread.join()
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["payload"] for line in result.stdout.splitlines()] == [
        {"i": 1},
        {"i": 2},
        {"i": 3},
    ]
    assert caplog.text.count("live query lost the journal, reading on once it is back") == 1
    assert "tag query reads the journal again after" in caplog.text
