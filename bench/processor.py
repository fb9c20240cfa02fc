"""Events/s through a TrackingProcessor with 1, 2 and 4 threads, on SQLite and PostgreSQL.

    .venv/bin/python bench/processor.py [--backend sqlite|postgres|both] [--events N]
        [--policy per_aggregate|sequential|concurrent|property:<name>] [--quick]

Each figure starts a processor (as many segments as threads) on a journal that already holds
N tagged events of 400 persistence ids, and times it until every event was handled. Two
handlers: a no-op (the cost of claiming, reading, batching and storing tokens) and a
projection that upserts a row per event in the batch's transaction (exactly-once). The
eventual-consistency delay is 0: the events are settled, so this measures the pipeline.
`--policy` picks the sequencing policy (per_aggregate by default): under `concurrent` and
`property:` a processor records every event it handled instead of a position per id.
A benchmark reports; it exits 0.
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

import psycopg

from _args import positive_count
from _postgres import bench_postgres
from _report import Row, machine_lines, print_table
from ordo import EventsByTagSettings, NewEvent, QuerySettings, open_journal
from ordo.errors import ConfigurationError
from ordo.processing import (
    EventSource,
    HandlerContext,
    SequencingPolicy,
    TrackingProcessor,
    policy_from_name,
)
from ordo.query import EventEnvelope
from ordo.settings import ProcessorSettings
from ordo.storage.open import open_stores
from ordo.time import format_first_time_bucket
from ordo.types import Tag

THREADS = (1, 2, 4)
LIBRARIES = ("ordo", "psycopg")
APPEND_BATCH = 50
DEFAULT_EVENTS = 50_000
QUICK_EVENTS = 5_000
WRITE = EventsByTagSettings(
    first_time_bucket=format_first_time_bucket(time.time_ns() // 1_000_000 - 3_600_000),
    max_message_batch_size=1_000,
)
READ = QuerySettings(
    eventual_consistency_delay=timedelta(0),
    refresh_interval=timedelta(milliseconds=20),
    back_track_interval=timedelta(seconds=30),
    back_track_long_interval=timedelta(seconds=60),
)


def populate(url: str, events: int) -> None:
    """Exactly `events` events, in appends of APPEND_BATCH (the last one shorter when need be).

    Every figure waits until its processor has handled `events` events: whole batches only
    (`events // 50` appends) left a count that is not a multiple of the batch short, and each
    figure waited its full timeout for events never written, then printed a rate.
    """
    with open_journal(url, settings=WRITE) as journal:
        batch = [
            NewEvent.of({"amount": i, "currency": "EUR"}, tags=["order"])
            for i in range(APPEND_BATCH)
        ]
        for k, start in enumerate(range(0, events, APPEND_BATCH)):
            journal.append(f"order-{k % 400}", batch[: events - start])


def projection(event: EventEnvelope, context: HandlerContext) -> None:
    p = context.placeholder
    context.connection.execute(
        f"INSERT INTO totals (pid, n) VALUES ({p}, 1) "
        "ON CONFLICT (pid) DO UPDATE SET n = totals.n + 1",
        (event.persistence_id,),
    )


RUN_LIMIT_S = 600
"""How long a run may take to handle its events before the bench gives up on it."""


def run(
    url: str,
    events: int,
    threads: int,
    handler: Callable[[EventEnvelope, HandlerContext], object],
    name: str,
    policy: SequencingPolicy,
) -> float:
    stores = open_stores(url)
    done = 0
    lock = threading.Lock()
    finished = threading.Event()

    def counting(event: EventEnvelope, context: HandlerContext) -> None:
        nonlocal done
        handler(event, context)
        with lock:
            done += 1
            if done >= events:
                finished.set()

    settings = ProcessorSettings(
        thread_count=threads,
        initial_segment_count=threads,
        batch_size=500,
        token_claim_interval=timedelta(milliseconds=200),
    )
    source = EventSource(
        reader=stores.tag_view_reader, tag=Tag("order"), query=READ, events_by_tag=WRITE
    )
    processor = TrackingProcessor(
        name, source, stores.tokens, counting, settings=settings, policy=policy
    )
    started = time.perf_counter()
    processor.start()
    try:
        while not finished.wait(0.5):
            if not processor.is_running or time.perf_counter() - started > RUN_LIMIT_S:
                # a rate of the events not handled would be no figure
                msg = f"{name}: handled {done} of {events} events; failure: {processor.failure!r}"
                raise SystemExit(msg)
        return events / (time.perf_counter() - started)
    finally:
        processor.stop()
        stores.close()


def bench(
    label: str,
    url: str,
    events: int,
    rows: list[Row],
    prepare: Callable[[str], None],
    policy: SequencingPolicy,
) -> None:
    populate(url, events)
    prepare(url)
    for kind, handler in (("no-op", lambda e, c: None), ("projection", projection)):
        for threads in THREADS:
            rate = run(url, events, threads, handler, f"{kind}-{threads}", policy)
            rows.append(
                Row(f"{label}: {kind} handler, {threads} thread(s)", f"{rate:,.0f}", "events/s")
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--events", type=positive_count, default=None)
    parser.add_argument("--policy", default="per_aggregate", help="the sequencing policy")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    try:
        policy = policy_from_name(args.policy)
    except ConfigurationError as exc:  # a usage error like argparse's, not a traceback
        parser.error(f"argument --policy: {exc}")
    events = args.events or (QUICK_EVENTS if args.quick else DEFAULT_EVENTS)
    rows: list[Row] = []
    ddl = "CREATE TABLE IF NOT EXISTS totals (pid TEXT PRIMARY KEY, n BIGINT NOT NULL)"
    with ExitStack() as stack:
        # The server starts before the header, which names its version as the other benches'
        # do: the PostgreSQL figures named no server.
        server = (
            stack.enter_context(bench_postgres()) if args.backend in ("postgres", "both") else None
        )
        postgres_version = "not run" if server is None else server.version
        print("\n".join(machine_lines(postgres_version=postgres_version, libraries=LIBRARIES)))
        print(
            f"workload:   {events} events of one tag over 400 persistence ids; "
            f"segments = threads; policy {args.policy}\n"
        )
        if args.backend in ("sqlite", "both"):
            directory = stack.enter_context(tempfile.TemporaryDirectory())

            def prepare_sqlite(url: str) -> None:
                with sqlite3.connect(url) as conn:
                    conn.execute(ddl)

            url = str(Path(directory) / "bench.db")
            bench("sqlite", url, events, rows, prepare_sqlite, policy)
        if server is not None:
            database = server.fresh_database("processor")

            def prepare_postgres(url: str) -> None:
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute(ddl)

            bench("postgres", database.dsn, events, rows, prepare_postgres, policy)
    print_table(rows)


if __name__ == "__main__":
    main()
