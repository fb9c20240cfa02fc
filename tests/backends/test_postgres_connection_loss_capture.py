"""Captures and snapshots of a PostgreSQL change source riding out ended sessions, and giving
up once the server is gone for good (see connection_loss_support)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from connection_loss_support import CAPTURE_APPLICATION_NAME, Sessions
from ordo.cdc import Publisher, SchemaRegistry
from ordo.cdc.capture import Capture, CaptureTotals
from ordo.cdc.change_rows import ChangeRows
from ordo.cdc.mutation import Mutation
from ordo.errors import AlreadyRunningError, StorageAccessError, StorageUnavailableError
from ordo.settings import CaptureSettings
from ordo.storage.change_sources import change_source_at
from ordo.storage.open import stores_at
from ordo.storage.parquet import ParquetChangeLog
from ordo.storage.postgres.change_source import PostgresChangeSource
from ordo.storage.postgres.throwaway import ThrowawayPostgres
from postgres_source_support import fresh_slot

pytestmark = pytest.mark.postgres


@pytest.fixture
def slot(sessions: Sessions) -> Iterator[str]:
    """The name of a slot for captures of table `items` (id, v), which this creates first; the
    slot is dropped after the test (slots are cluster-wide)."""
    name = fresh_slot()
    sessions.execute("CREATE TABLE items (id bigint PRIMARY KEY, v int)")
    yield name
    with change_source_at(sessions.url, ["items"], slot=name) as source:
        source.drop()  # type: ignore[attr-defined]


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
    sessions: Sessions, slot: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A following capture failed at the first call after the loss (StorageUnavailableError).

    Its sessions are ended between a publish and the slot's advance, then twice more while rows
    change: every change is in the log once, in order, and the capture holds its lock again.
    """
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
    with (
        stores_at(sessions.url) as stores,
        change_source_at(sessions.url, ["items"], slot=slot) as source,
    ):
        capture = Capture(source, Publisher(log), SchemaRegistry(stores.schemas), settings=_FAST)
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
    sessions: Sessions, slot: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing a capture's session releases its lock first, while the session is still there.

    The lock went only with the closed session's backend, a moment after the close: a capture
    started right after another stopped was refused as already running. Starting captures in
    a row hit that moment only on a loaded machine; another session looks at pg_locks as the
    capture's session is being closed instead, when the old close still held the lock.
    """
    held_at_close: list[int] = []  # per capture session closed: the advisory locks it held
    with psycopg.connect(sessions.url, autocommit=True) as observer:
        close = psycopg.Connection.close

        def observed_close(conn: psycopg.Connection[object]) -> None:
            if (
                not conn.closed
                and conn.info.parameter_status("application_name") == CAPTURE_APPLICATION_NAME
            ):
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
    sessions: Sessions, slot: str, tmp_path: Path
) -> None:
    """The capture is held between two polls while its sessions end and another capture takes
    the lock. (A sleep let it poll first: on a loaded machine its poll met the ended sessions,
    and it took the lock again before the other capture could.)"""
    held = _HeldAtItsFirstWait()
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
    sessions: Sessions, slot: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`ordo cdc capture --snapshot` failed at once with `StorageUnavailableError: PostgreSQL is
    unavailable: terminating connection due to administrator command`, unlike the capture after
    it, which retries for its reconnect timeout."""
    sessions.execute("INSERT INTO items SELECT g, g FROM generate_series(1, 2500) AS g")
    log = ParquetChangeLog(tmp_path / "log")
    caplog.set_level(logging.INFO, logger="ordo.cdc.capture")
    source = _EndingSessionsMidSnapshot(sessions, slot=slot, tables=["items"])
    with stores_at(f"sqlite:///{tmp_path / 'journal.db'}") as stores, source:
        source.create()
        capture = Capture(source, Publisher(log), SchemaRegistry(stores.schemas))
        receipt = capture.publish_snapshot("items")
    assert receipt.published == {"items": 2500}
    logged = list(log.read("items"))
    assert sorted(int(str(m.partition_key[0])) for m in logged) == list(range(1, 2501))
    assert len({m.audit.segment for m in logged}) == 1  # the second attempt's snapshot
    assert "snapshot of 'items' unavailable, retrying in 0.1 s (attempt 1, for up to 60 s" in (
        caplog.text
    )
    assert "capture reconnected after" in caplog.text
