"""Several processes share a processor's segments through PostgreSQL (issue 4, G4)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from ordo import NewEvent, open_journal
from ordo.processing.control import merge_segment, split_segment
from ordo.storage.open import open_stores
from ordo.storage.stores import Stores
from processing_support import FAST, WRITE, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

CHILD = Path(__file__).with_name("processor_child.py")
TIMEOUT_MS = FAST.claim_timeout.total_seconds() * 1000


@pytest.fixture
def applied_table(postgres_dsn: str) -> str:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE applied (pid TEXT, nr BIGINT, owner TEXT, PRIMARY KEY (pid, nr))"
        )
    return postgres_dsn


StartChild = Callable[..., subprocess.Popen[str]]


@pytest.fixture
def start_child(applied_table: str) -> Iterator[StartChild]:
    children: list[subprocess.Popen[str]] = []

    def start(threads: int, segments: int, *options: str) -> subprocess.Popen[str]:
        """A child with `options`: STALL_AT and HANDLE_MS (processor_child.py)."""
        env = {
            **os.environ,
            "PYTHONPATH": f"{CHILD.parent.parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        }
        child = subprocess.Popen(
            [sys.executable, str(CHILD), applied_table, str(threads), str(segments), *options],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "started"
        children.append(child)
        return child

    yield start
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGCONT)
            child.send_signal(signal.SIGTERM)
            child.wait(timeout=30)
        if child.stdout is not None:
            child.stdout.close()


@pytest.fixture
def stores(applied_table: str) -> Iterator[Stores]:
    opened = open_stores(applied_table)
    yield opened
    opened.close()


def _appliers(dsn: str) -> set[str]:
    """The process ids of the children that applied events."""
    with psycopg.connect(dsn) as conn:
        return {str(row[0]) for row in conn.execute("SELECT DISTINCT owner FROM applied")}


def _applied(dsn: str) -> list[tuple[str, int]]:
    with psycopg.connect(dsn) as conn:
        return [(str(r[0]), int(r[1])) for r in conn.execute("SELECT pid, nr FROM applied")]


def _append(dsn: str, start: int, count: int) -> None:
    with open_journal(dsn, settings=WRITE) as journal:
        for i in range(start, start + count):
            journal.append(f"p{i % 25}", [NewEvent.of(i, tags=["t"])])


def _expected(total: int) -> list[tuple[str, int]]:
    return sorted((f"p{i % 25}", i // 25 + 1) for i in range(total))


def test_two_processes_share_the_segments_and_apply_each_event_once(
    applied_table: str, start_child: StartChild, stores: Stores
) -> None:
    start_child(2, 4)
    start_child(2, 4)
    _append(applied_table, 0, 400)
    wait_for(lambda: len(_applied(applied_table)) == 400, timeout=60)
    owners = {e.owner.split("#")[0] for e in stores.tokens.entries("applier") if e.owner}
    assert len(owners) == 2  # both processes hold segments, none the same
    assert sorted(_applied(applied_table)) == _expected(400)


def test_a_killed_process_segments_are_taken_over_after_the_claim_timeout(
    applied_table: str, start_child: StartChild, stores: Stores
) -> None:
    first = start_child(4, 4)
    _append(applied_table, 0, 200)
    wait_for(lambda: len(_applied(applied_table)) == 200, timeout=60)
    start_child(4, 4)  # idle: every segment is held by the first process
    first.send_signal(signal.SIGKILL)
    first.wait()
    killed_at = time.monotonic()
    _append(applied_table, 200, 200)
    wait_for(lambda: len(_applied(applied_table)) == 400, timeout=60)
    assert time.monotonic() - killed_at >= TIMEOUT_MS / 1000 * 0.5
    assert sorted(_applied(applied_table)) == _expected(400)


def test_split_and_merge_across_processes_lose_and_repeat_nothing(
    applied_table: str, start_child: StartChild, stores: Stores
) -> None:
    start_child(3, 2)
    start_child(3, 2)

    def now() -> int:
        return time.time_ns() // 1_000_000

    _append(applied_table, 0, 150)
    split_segment(stores.tokens, "applier", 0, now_ms=now(), claim_timeout_ms=int(TIMEOUT_MS))
    _append(applied_table, 150, 150)
    wait_for(lambda: len(stores.tokens.entries("applier")) == 3, timeout=30)
    merge_segment(stores.tokens, "applier", 2, now_ms=now(), claim_timeout_ms=int(TIMEOUT_MS))
    _append(applied_table, 300, 150)
    wait_for(lambda: len(stores.tokens.entries("applier")) == 2, timeout=30)
    _append(applied_table, 450, 150)
    wait_for(lambda: len(_applied(applied_table)) == 600, timeout=60)
    assert sorted(_applied(applied_table)) == _expected(600)


def test_a_process_stopped_mid_batch_does_not_hold_up_the_others(
    applied_table: str, start_child: StartChild
) -> None:
    # The first process stops itself inside a batch, holding the rows it wrote and the
    # positions' locks; the server ends its idle transaction after the claim timeout, so the
    # second process takes the segments over instead of waiting for the stalled one.
    stalled = start_child(4, 4, "p3#2")
    _append(applied_table, 0, 200)
    assert stalled.stdout is not None
    assert stalled.stdout.readline().strip() == "stalled"
    start_child(4, 4)
    wait_for(lambda: len(_applied(applied_table)) == 200, timeout=60)
    stalled.send_signal(signal.SIGCONT)  # its batch fails at its next statement: rolled back
    _append(applied_table, 200, 200)
    wait_for(lambda: len(_applied(applied_table)) == 400, timeout=60)
    assert sorted(_applied(applied_table)) == _expected(400)


def test_a_busy_process_keeps_its_segment_through_a_poll_longer_than_the_claim_timeout(
    applied_table: str, start_child: StartChild, stores: Stores
) -> None:
    # One poll reads all 250 events; handled 50 to a batch at 10 ms each, its batches take
    # 2.5 s, over the claim timeout (2 s), each one 0.5 s. The busy process extends its claim
    # between batches, so the idle one never finds it expired and takes nothing over.
    _append(applied_table, 0, 250)
    busy = start_child(1, 1, "-", "10")
    wait_for(lambda: f":{busy.pid}:" in str(stores.tokens.entries("applier")[0].owner))
    start_child(1, 1)
    wait_for(lambda: len(_applied(applied_table)) == 250, timeout=60)
    assert _appliers(applied_table) == {str(busy.pid)}
    assert sorted(_applied(applied_table)) == _expected(250)
