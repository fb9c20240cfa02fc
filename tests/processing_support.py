"""Helpers of the tracking processor tests: fast settings, a counting handler and the
"counts" processor that runs it, appending events and counting what was applied, and waiting:
for a condition (`wait_for`, which tests of every kind use, a subprocess's early exit failing
it), and for the processor to claim its segment 0.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from typing import Any

from ordo import EventsByTagSettings, Journal, NewEvent, QuerySettings
from ordo.clock import Clock
from ordo.hashing import stable_hash
from ordo.processing.ports import TokenStore
from ordo.processing.processor import HandlerContext, TrackingProcessor
from ordo.processing.source import EventSource
from ordo.query import EventEnvelope
from ordo.settings import ProcessorSettings
from ordo.storage.stores import Stores
from ordo.time import format_first_time_bucket

SqlRunner = Callable[..., list[tuple[object, ...]]]
"""The `sql` fixture of tests/processing: one statement on the journal's database, its rows."""

WRITE = EventsByTagSettings(
    first_time_bucket=format_first_time_bucket(time.time_ns() // 1_000_000 - 3_600_000),
    flush_interval=timedelta(milliseconds=20),
)
READ = QuerySettings(
    eventual_consistency_delay=timedelta(milliseconds=100),
    refresh_interval=timedelta(milliseconds=50),
    back_track_interval=timedelta(milliseconds=200),
    back_track_period=timedelta(seconds=2),
)
FAST = ProcessorSettings(
    thread_count=8,
    initial_segment_count=4,
    batch_size=50,
    claim_timeout=timedelta(seconds=2),
    token_claim_interval=timedelta(milliseconds=200),
    retry_backoff=timedelta(milliseconds=1),
)


def counting_handler(event: EventEnvelope, context: HandlerContext) -> None:
    """Count events per persistence id in the batch's transaction; insist on their order."""
    p = context.placeholder
    conn = context.connection
    row = conn.execute(
        f"SELECT n, last, replays FROM counts WHERE pid = {p}",
        (event.persistence_id,),
    ).fetchone()
    n, last, replays = row if row else (0, 0, 0)
    if event.tag_pid_sequence_nr != last + 1 and not context.is_replay:
        msg = f"{event.persistence_id}: got {event.tag_pid_sequence_nr} after {last}"
        raise AssertionError(msg)
    conn.execute(
        f"INSERT INTO counts VALUES ({p}, {p}, {p}, {p}) ON CONFLICT (pid) DO UPDATE SET "
        "n = excluded.n, last = excluded.last, replays = excluded.replays",
        (event.persistence_id, n + 1, event.tag_pid_sequence_nr, replays + context.is_replay),
    )


class TokenStoreDouble:
    """The token store it wraps, but for what a subclass does instead: a race double.

    An override forwards the keyword options it is given (`**options`) as they are.
    """

    def __init__(self, tokens: TokenStore) -> None:
        self._tokens = tokens

    def __getattr__(self, name: str) -> object:
        return getattr(self._tokens, name)


def counts_processor(
    stores: Stores,
    *,
    settings: ProcessorSettings = FAST,
    clock: Clock | None = None,
    tokens: TokenStoreDouble | None = None,
) -> TrackingProcessor:
    """The "counts" processor: `counting_handler` over the events tagged "t".

    Its token store is `stores.tokens`, or `tokens`: a race double wrapping it.
    """
    return TrackingProcessor(
        "counts",
        source(stores),
        stores.tokens if tokens is None else tokens,  # type: ignore[arg-type]
        counting_handler,
        settings=settings,
        clock=clock,
    )


def append_events(journal: Journal, count: int, *, pids: int = 20, tag: str = "t") -> None:
    """Append `count` events tagged `tag`, one at a time to p0, p1, ... p{pids - 1} in turn."""
    for i in range(count):
        journal.append(f"p{i % pids}", [NewEvent.of({"i": i}, tags=[tag])])


def counted(sql: SqlRunner) -> int:
    """How many events `counting_handler` applied, over all persistence ids."""
    return int(str(sql("SELECT coalesce(sum(n), 0) FROM counts")[0][0]))


def now_ms() -> int:
    """The system clock in milliseconds, as the token store's `now_ms` arguments take it."""
    return time.time_ns() // 1_000_000


def in_half(half: int, prefix: str) -> str:
    """A persistence id whose hash lies in segment `half` of two."""
    return next(f"{prefix}{i}" for i in range(1000) if stable_hash(f"{prefix}{i}") & 1 == half)


def source(stores: Stores, tag: str = "t", *, query: QuerySettings = READ) -> EventSource:
    return EventSource(reader=stores.tag_view_reader, tag=tag, query=query, events_by_tag=WRITE)  # type: ignore[arg-type]


def wait_for(
    predicate: Callable[[], object],
    *,
    timeout: float = 30.0,
    what: str = "",
    process: subprocess.Popen[Any] | None = None,
) -> None:
    """Return once `predicate()` is true; AssertionError after `timeout` seconds, naming `what`
    was waited for (the test's words: "the append to write").

    With `process`, a process that has ended fails the wait at once, with its exit status and
    output: what a test waits for from it would never come, and its output says why.
    """
    deadline = time.monotonic() + timeout
    waited = f" for {what}" if what else ""
    while not predicate():
        if process is not None and process.poll() is not None:
            output = _output(process)
            msg = f"the process ended with status {process.returncode} while waiting{waited}"
            raise AssertionError(f"{msg}: {output}" if output else msg)
        if time.monotonic() > deadline:
            msg = f"timed out after {timeout:g} s waiting{waited}"
            raise AssertionError(msg)
        time.sleep(0.05)


def _output(process: subprocess.Popen[Any]) -> str:
    """What an ended `process` wrote to the pipes it was given (none when a child it left
    behind holds them open)."""
    try:
        parts = process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        return "(its output is held by a process it left)"
    return "".join(
        part if isinstance(part, str) else part.decode(errors="replace") for part in parts if part
    )


def owner_of_segment_0(stores: Stores) -> str:
    """The owner of segment 0 of "counts", once the processor has claimed it."""
    wait_for(lambda: stores.tokens.entries("counts")[0].owner is not None)
    owner = stores.tokens.entries("counts")[0].owner
    assert owner is not None
    return owner


@contextmanager
def holding_segment_0(
    stores: Stores, tokens: TokenStoreDouble
) -> Iterator[tuple[TrackingProcessor, str]]:
    """A running one-thread "counts" processor over one segment through `tokens` (the store
    behind a race double), once it has claimed the segment, and the owner it claimed it as."""
    settings = replace(FAST, thread_count=1, initial_segment_count=1)
    with counts_processor(stores, settings=settings, tokens=tokens) as processor:
        yield processor, owner_of_segment_0(stores)
