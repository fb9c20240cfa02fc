"""Long-lived PostgreSQL objects after the server ended their sessions.

A restart, a failover or an administrator ends a server's sessions; here pg_terminate_backend
does, from another connection, and the same objects are used again without reopening anything.
Only this test's sessions are ended: the URL names them by application_name (a capture names
the session that holds its lock after this process).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlencode, urlsplit, urlunsplit

import psycopg
import pytest

from ordo import NO_OFFSET, NewEvent, events_by_tag_at, open_journal, open_stores
from ordo.cdc import Publisher, SchemaRegistry
from ordo.cdc.capture import Capture, CaptureTotals
from ordo.cdc.change_rows import ChangeRows
from ordo.cdc.mutation import Mutation
from ordo.errors import AlreadyRunningError, StorageAccessError, StorageUnavailableError
from ordo.processing import HandlerContext, TrackingProcessor
from ordo.query import EventEnvelope
from ordo.settings import CaptureSettings
from ordo.storage.change_sources import change_source_at
from ordo.storage.open import Stores, stores_at
from ordo.storage.parquet import ParquetChangeLog
from ordo.storage.postgres.change_source import PostgresChangeSource
from ordo.storage.postgres.notification import PostgresTagListener
from ordo.storage.postgres.tag_view_store import TAG_WRITTEN_CHANNEL
from ordo.storage.postgres.throwaway import ThrowawayPostgres
from ordo.tagging.notification import TagNotifier
from ordo.tools.verification import check_tag_views
from ordo.types import Tag
from processing_support import FAST, READ, WRITE, counting_handler, source, wait_for

pytestmark = pytest.mark.postgres

# With a timeout the call returns once the sessions are gone, as after a restart or a failover.
_TERMINATE = (
    "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
    "WHERE application_name IN (%s, %s) AND pid <> pg_backend_pid()"
)
_CAPTURE = f"ordo cdc capture pid {os.getpid()} on {socket.gethostname()}"
"""The application_name of the session holding a capture's lock (the capture's own)."""


class Sessions:
    """This test's URL (its sessions named by application_name) and a way to end them."""

    def __init__(self, dsn: str) -> None:
        self.name = f"ordo-loss-{secrets.token_hex(4)}"
        parts = urlsplit(dsn)
        named = urlencode({"application_name": self.name})
        query = f"{parts.query}&{named}" if parts.query else named
        self.url = urlunsplit(parts._replace(query=query))
        self._dsn = dsn

    def terminate(self) -> int:
        """End every session of this test's URL and of this process's captures; how many."""
        with psycopg.connect(self._dsn, autocommit=True) as conn:
            row = conn.execute(_TERMINATE, (self.name, _CAPTURE)).fetchone()
        return 0 if row is None else int(row[0])

    def execute(self, statement: str, params: tuple[object, ...] = ()) -> None:
        """Run `statement`, committed durably: a slot decodes it at once."""
        with psycopg.connect(self._dsn, autocommit=True) as conn:
            conn.execute("SET synchronous_commit = on")
            conn.execute(statement, params)


@pytest.fixture
def sessions(postgres_dsn: str) -> Sessions:
    return Sessions(postgres_dsn)


@pytest.fixture
def stores(sessions: Sessions) -> Iterator[Stores]:
    opened = open_stores(sessions.url)
    yield opened
    opened.close()


def _fill_pool(stores: Stores) -> None:
    """Have the pool hold all its connections at once (8 open transactions); idle after."""
    barrier = threading.Barrier(8)

    def hold() -> None:
        with stores.tokens.batch("processor", 0, "owner"):
            barrier.wait()

    threads = [threading.Thread(target=hold) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


CALLS: dict[str, Callable[[Stores], object]] = {
    "journal": lambda s: s.journal.highest_sequence_nr("p"),  # type: ignore[arg-type]
    "tokens": lambda s: s.tokens.processors(),
    "change sink": lambda s: s.change_sink.progress(),
    "schemas": lambda s: s.schemas.tables(),
    "operations": lambda s: s.operations.count_time_buckets(),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_each_store_call_after_the_sessions_ended_succeeds(
    sessions: Sessions, stores: Stores, call: Callable[[Stores], object]
) -> None:
    _fill_pool(stores)
    assert sessions.terminate() == 8
    for _ in range(3):  # each idle connection of the pool is dead: none is lent
        call(stores)


def test_appends_after_the_sessions_ended_lose_and_repeat_nothing(sessions: Sessions) -> None:
    with open_journal(sessions.url, settings=WRITE) as journal:
        for i in range(3):
            journal.append("a", [NewEvent.of({"i": i}, tags=["t"])])
        journal.flush()
        assert sessions.terminate() >= 1
        for i in range(3, 6):
            journal.append("a", [NewEvent.of({"i": i}, tags=["t", "u"])])
        journal.flush()
        numbers = [e.sequence_nr for e in journal.replay("a")]
        payloads = [e.payload for e in journal.replay("a")]
    assert numbers == [1, 2, 3, 4, 5, 6]
    assert payloads == [{"i": i} for i in range(6)]
    with stores_at(sessions.url) as stores:
        report = check_tag_views(stores.journal, stores.tag_views, WRITE.bucket_size)
    assert report.is_clean, report
    assert (report.tagged_events, report.tag_view_rows) == (9, 9)


def test_a_journal_closed_after_the_sessions_ended_releases_its_writer_lease(
    sessions: Sessions,
) -> None:
    journal = open_journal(sessions.url)
    journal.append("a", [NewEvent.of({"i": 0})])
    assert sessions.terminate() >= 1
    journal.close()
    with stores_at(sessions.url) as stores:
        assert not stores.operations.live_writers(since_ms=0)


def test_a_live_query_reads_on_after_the_sessions_ended(sessions: Sessions) -> None:
    with open_journal(sessions.url, settings=WRITE) as journal:
        journal.append("a", [NewEvent.of({"i": 0}, tags=["t"])])
        journal.flush()
        with (
            events_by_tag_at(sessions.url, settings=READ, events_by_tag=WRITE) as queries,
            queries.live("t", NO_OFFSET) as stream,
        ):
            assert next(stream).sequence_nr == 1
            journal.append("a", [NewEvent.of({"i": 1}, tags=["t"])])
            journal.flush()
            assert sessions.terminate() >= 1
            assert next(stream).sequence_nr == 2


def test_a_session_ended_during_a_careful_rerun_does_not_stop_the_processor(
    sessions: Sessions, stores: Stores
) -> None:
    """A lost connection is the batch's failure, not the handler's, in a careful rerun too.

    The rerun that follows a handler failure handles each event in a savepoint, with retries
    and then error_mode. When the session ended there, the savepoint's own statements failed
    and were taken for the handler's: the retries failed alike, and error_mode FAIL stopped
    the processor with EventHandlingError instead of claiming the segment again.
    """
    with stores.tokens.batch("setup", 0, "owner") as batch:
        batch.connection.execute(
            "CREATE TABLE counts (pid TEXT PRIMARY KEY, n INT, last INT, replays INT)"
        )
    calls: dict[str, int] = {}

    def handler(event: EventEnvelope, context: HandlerContext) -> None:
        calls[event.persistence_id] = calls.get(event.persistence_id, 0) + 1
        if event.persistence_id == "p3":
            if calls["p3"] == 1:
                msg = "first call fails: the batch is rerun carefully"
                raise ValueError(msg)
            if calls["p3"] == 2:
                sessions.terminate()  # the careful rerun's session ends under it
        counting_handler(event, context)

    with open_journal(sessions.url, settings=WRITE) as journal:
        for i in range(6):
            journal.append(f"p{i}", [NewEvent.of(i, tags=["t"])])
    settings = replace(FAST, thread_count=1, initial_segment_count=1)
    with TrackingProcessor(
        "counts", source(stores), stores.tokens, handler, settings=settings
    ) as processor:
        wait_for(lambda: len(_counts(stores)) == 6 or not processor.is_running)
        assert processor.failure is None
    assert _counts(stores) == {f"p{i}": 1 for i in range(6)}


def _counts(stores: Stores) -> dict[str, int]:
    with stores.tokens.batch("reader", 0, "owner") as batch:
        rows = batch.connection.execute("SELECT pid, n FROM counts").fetchall()
    return {str(pid): int(n) for pid, n in rows}


class _EndingSessionsOnce(ParquetChangeLog):
    """A change log whose first append ends the sessions once its files are in place.

    The capture then fails to advance the slot past the window it has just published: the
    moment between publish and advance, where a lost session must repeat nothing.
    """

    def __init__(self, root: Path, sessions: Sessions) -> None:
        super().__init__(root)
        self._sessions: Sessions | None = sessions

    def append(self, table: str, files: Sequence[tuple[int, ChangeRows]]) -> None:
        super().append(table, files)
        if self._sessions is not None:
            assert self._sessions.terminate() >= 2  # the capture's and the journal's pool
            self._sessions = None


class _Running:
    """`capture.run()` in a thread until `stop()`; what it returned or raised."""

    def __init__(self, capture: Capture, *, stop: threading.Event | None = None) -> None:
        self._stop = stop or threading.Event()
        self.totals: CaptureTotals | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(capture,))
        self._thread.start()

    def _run(self, capture: Capture) -> None:
        try:
            self.totals = capture.run(stop=self._stop)
        except BaseException as exc:  # reported by the test
            self.error = exc

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)


_FAST = CaptureSettings(
    max_changes=6,
    flush_interval=timedelta(milliseconds=50),
    poll_interval=timedelta(milliseconds=20),
)


def _changes_of(log: ParquetChangeLog, count: int, running: _Running) -> list[tuple[int, int]]:
    """(key, value) of the log's changes in position order, once it holds `count` (30 s)."""
    deadline = time.monotonic() + 30
    while True:
        logged = sorted(log.read("items"), key=lambda m: m.audit.position)
        if len(logged) >= count or time.monotonic() > deadline or running.error is not None:
            break
        time.sleep(0.05)
    assert running.error is None, running.error
    return [(int(str(m.partition_key[0])), int(str(m.cells["v"].value))) for m in logged]


def test_a_capture_rides_out_ended_sessions_publishing_each_change_once(
    sessions: Sessions, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A following capture failed at the first call after the loss (StorageUnavailableError).

    Its sessions are ended between a publish and the slot's advance, then twice more while rows
    change: every change is in the log once, in order, and the capture holds its lock again.
    """
    slot = f"ordo_test_{secrets.token_hex(6)}"
    sessions.execute("CREATE TABLE items (id bigint PRIMARY KEY, v int)")
    log = _EndingSessionsOnce(tmp_path / "log", sessions)
    written: list[tuple[int, int]] = []

    def write(round_: int) -> None:
        for key in range(4):
            sessions.execute(
                "INSERT INTO items VALUES (%s, %s) ON CONFLICT (id) DO UPDATE SET v = %s",
                (key, round_, round_),
            )
            written.append((key, round_))

    caplog.set_level(logging.INFO, logger="ordo.cdc.capture")
    try:
        with (
            stores_at(sessions.url) as stores,
            change_source_at(sessions.url, ["items"], slot=slot) as source,
        ):
            capture = Capture(
                source, Publisher(log), SchemaRegistry(stores.schemas), settings=_FAST
            )
            running = _Running(capture)
            try:
                write(0)
                assert _changes_of(log, len(written), running) == written
                for round_ in (1, 2):
                    assert sessions.terminate() >= 2
                    write(round_)
                    assert _changes_of(log, len(written), running) == written
                with (
                    pytest.raises(AlreadyRunningError, match=slot),
                    change_source_at(sessions.url, ["items"], slot=slot),
                ):
                    pass
            finally:
                running.stop()
    finally:
        with change_source_at(sessions.url, ["items"], slot=slot) as source:
            source.drop()  # type: ignore[attr-defined]
    assert running.error is None, running.error
    assert running.totals is not None
    assert running.totals.skipped >= 1  # the window published before the loss, re-peeked
    assert _changes_of(log, len(written), running) == written  # nothing came twice later
    assert "capture unavailable, retrying in 0.1 s (attempt 1, for up to 60 s" in caplog.text
    assert "capture reconnected after" in caplog.text


_CAPTURE_LOCKS_OF = (
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = %s"
)


def test_a_capture_of_the_slot_starts_right_after_the_last_one_closed(
    sessions: Sessions, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing a capture's session releases its lock first, while the session is still there.

    The lock went only with the closed session's backend, a moment after the close: a capture
    started right after another stopped was refused as already running. Starting captures in
    a row hit that moment only on a loaded machine; another session looks at pg_locks as the
    capture's session is being closed instead, when the old close still held the lock.
    """
    slot = f"ordo_test_{secrets.token_hex(6)}"
    sessions.execute("CREATE TABLE items (id bigint PRIMARY KEY, v int)")
    held_at_close: list[int] = []  # per capture session closed: the advisory locks it held
    with psycopg.connect(sessions.url, autocommit=True) as observer:
        close = psycopg.Connection.close

        def observed_close(conn: psycopg.Connection[object]) -> None:
            if not conn.closed and conn.info.parameter_status("application_name") == _CAPTURE:
                row = observer.execute(_CAPTURE_LOCKS_OF, (conn.info.backend_pid,)).fetchone()
                held_at_close.append(0 if row is None else int(row[0]))
            close(conn)

        monkeypatch.setattr(psycopg.Connection, "close", observed_close)
        try:
            with change_source_at(sessions.url, ["items"], slot=slot):
                pass
            with change_source_at(sessions.url, ["items"], slot=slot):
                pass  # the next capture of the slot starts at once
        finally:
            monkeypatch.undo()
            with change_source_at(sessions.url, ["items"], slot=slot) as source:
                source.drop()  # type: ignore[attr-defined]
    assert held_at_close
    assert set(held_at_close) == {0}


class _HeldAtItsFirstWait(threading.Event):
    """A capture's stop event whose first wait (once the capture polled) lasts until
    `go_on()` (or `set()`); `waiting` is set then, and the capture does nothing more meanwhile.
    """

    def __init__(self) -> None:
        super().__init__()
        self.waiting = threading.Event()
        self._go_on = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        if not self.waiting.is_set():
            self.waiting.set()
            self._go_on.wait()
        return super().wait(timeout)

    def go_on(self) -> None:
        self._go_on.set()

    def set(self) -> None:
        super().set()
        self.go_on()


def test_a_capture_whose_lock_another_took_meanwhile_stops(
    sessions: Sessions, tmp_path: Path
) -> None:
    """The capture is held between two polls while its sessions end and another capture takes
    the lock. (A sleep let it poll first: on a loaded machine its poll met the ended sessions,
    and it took the lock again before the other capture could.)"""
    slot = f"ordo_test_{secrets.token_hex(6)}"
    sessions.execute("CREATE TABLE items (id bigint PRIMARY KEY, v int)")
    held = _HeldAtItsFirstWait()
    try:
        with (
            stores_at(sessions.url) as stores,
            change_source_at(sessions.url, ["items"], slot=slot) as source,
        ):
            log = ParquetChangeLog(tmp_path / "log")
            capture = Capture(source, Publisher(log), SchemaRegistry(stores.schemas))
            running = _Running(capture, stop=held)
            try:
                assert held.waiting.wait(30)  # the capture polled, and waits to poll again
                assert sessions.terminate() >= 2
                with change_source_at(sessions.url, ["items"], slot=slot):  # another capture
                    held.go_on()
                    running.join(30)
            finally:
                running.stop()
    finally:
        with change_source_at(sessions.url, ["items"], slot=slot) as source:
            source.drop()  # type: ignore[attr-defined]
    assert isinstance(running.error, AlreadyRunningError), running.error
    assert f"a capture of slot {slot!r} is already running" in str(running.error)


def test_a_capture_gives_up_after_its_reconnect_timeout(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A server that is gone for good (stopped): the capture retries for its reconnect timeout,
    then fails with StorageUnavailableError. (A server that refuses the URL is no outage: the
    capture stops at once, see test_postgres_refusal.py.)"""
    settings = CaptureSettings(
        reconnect_timeout=timedelta(seconds=1), poll_interval=timedelta(milliseconds=20)
    )
    server = ThrowawayPostgres()
    server.start()
    try:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, v int)")
        with change_source_at(server.dsn, ["items"], slot="ordo_gone") as source:
            log = ParquetChangeLog(tmp_path / "log")
            with stores_at(f"sqlite:///{tmp_path / 'journal.db'}") as stores:
                capture = Capture(
                    source, Publisher(log), SchemaRegistry(stores.schemas), settings=settings
                )
                running = _Running(capture)
                time.sleep(0.3)
                ended = time.monotonic()
                server.stop()
                running.join(30)
                lasted = time.monotonic() - ended
                gave_up = not running.is_alive()  # on its own, before stop() below
                running.stop()
    finally:
        server.stop()
    assert gave_up
    assert isinstance(running.error, StorageUnavailableError), running.error
    assert not isinstance(running.error, StorageAccessError)
    assert lasted >= 1  # not before its reconnect timeout (the server's stop is counted too)
    assert caplog.text.count("capture unavailable, retrying") >= 3


class _EndingSessionsMidSnapshot(PostgresChangeSource):
    """A capture's source whose first snapshot has the sessions ended after its first row.

    The snapshot's cursor fetches 1,000 rows at a time, so the next fetch of a larger table
    meets a session the server ended: a restart or a failover during a long snapshot.
    """

    def __init__(self, sessions: Sessions, *, slot: str, tables: list[str]) -> None:
        super().__init__(sessions.url, slot=slot, tables=tables, exclusive=True)
        self._sessions: Sessions | None = sessions

    def snapshot(self, table: str) -> Iterator[Mutation]:
        rows = super().snapshot(table)
        sessions, self._sessions = self._sessions, None
        if sessions is not None:
            yield next(rows)
            assert sessions.terminate() >= 2  # the snapshot's and the capture's own
        yield from rows


def test_a_snapshot_rides_out_ended_sessions_publishing_each_row_once(
    sessions: Sessions, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`ordo cdc capture --snapshot` failed at once with `StorageUnavailableError: PostgreSQL is
    unavailable: terminating connection due to administrator command`, unlike the capture after
    it, which retries for its reconnect timeout."""
    slot = f"ordo_test_{secrets.token_hex(6)}"
    sessions.execute("CREATE TABLE items (id bigint PRIMARY KEY, v int)")
    sessions.execute("INSERT INTO items SELECT g, g FROM generate_series(1, 2500) AS g")
    log = ParquetChangeLog(tmp_path / "log")
    caplog.set_level(logging.INFO, logger="ordo.cdc.capture")
    source = _EndingSessionsMidSnapshot(sessions, slot=slot, tables=["items"])
    try:
        with stores_at(f"sqlite:///{tmp_path / 'journal.db'}") as stores, source:
            source.create()
            capture = Capture(source, Publisher(log), SchemaRegistry(stores.schemas))
            receipt = capture.publish_snapshot("items")
    finally:
        sessions.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
    assert receipt.published == {"items": 2500}
    logged = list(log.read("items"))
    assert sorted(int(str(m.partition_key[0])) for m in logged) == list(range(1, 2501))
    assert len({m.audit.segment for m in logged}) == 1  # the second attempt's snapshot
    assert "snapshot of 'items' unavailable, retrying in 0.1 s (attempt 1, for up to 60 s" in (
        caplog.text
    )
    assert "capture reconnected after" in caplog.text


def _notified(sessions: Sessions, heard: threading.Event) -> bool:
    """NOTIFY the tag "t" until the listener forwards it (30 s); whether it did."""
    heard.clear()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        sessions.execute("SELECT pg_notify(%s, 't')", (TAG_WRITTEN_CHANNEL,))
        if heard.wait(0.1):
            return True
    return False


def test_the_tag_listener_listens_again_after_its_session_ended(
    sessions: Sessions, caplog: pytest.LogCaptureFixture
) -> None:
    """The listener stopped for good with `tag listener stopped: error=...`."""
    notifier, heard = TagNotifier(), threading.Event()
    notifier.subscribe(Tag("t"), lambda _: heard.set())
    caplog.set_level(logging.INFO, logger="ordo.storage.postgres.notification")
    listener = PostgresTagListener(sessions.url, notifier)
    try:
        assert _notified(sessions, heard)
        for _ in range(2):
            assert sessions.terminate() == 1
            assert _notified(sessions, heard)
    finally:
        listener.close()
    assert caplog.text.count("tag listener lost its connection, reconnecting") == 2
    assert caplog.text.count("tag listener reconnected after") == 2


def test_the_tag_listener_wakes_its_tags_once_it_listens_again(sessions: Sessions) -> None:
    """Announcements sent while it had no session were lost until each query's next refresh."""
    notifier, heard = TagNotifier(), threading.Event()
    notifier.subscribe(Tag("t"), lambda _: heard.set())
    listener = PostgresTagListener(sessions.url, notifier)
    try:
        assert _notified(sessions, heard)
        heard.clear()
        assert sessions.terminate() == 1
        assert heard.wait(30)  # no NOTIFY sent: the listener's reconnection woke the tag
    finally:
        listener.close()


def test_the_tag_listener_starts_inside_a_running_event_loop(sessions: Sessions) -> None:
    """A notebook's cell runs inside the kernel's asyncio loop: a listener that ran its own
    loop in the creating thread failed there ("another loop is running")."""
    notifier, heard = TagNotifier(), threading.Event()
    notifier.subscribe(Tag("t"), lambda _: heard.set())

    async def in_a_cell() -> PostgresTagListener:
        return PostgresTagListener(sessions.url, notifier)

    listener = asyncio.run(in_a_cell())
    try:
        assert _notified(sessions, heard)
    finally:
        listener.close()
