"""Append throughput of ordo's journal against the raw driver and the eventsourcing library.

    .venv/bin/python bench/append.py [--backend sqlite|postgres|both] [--events N] [--quick]
    .venv/bin/python bench/append.py --profile --backend sqlite   # where ordo's time goes

Every figure starts on an empty database: a fresh SQLite file in a temp dir, or a fresh
database on one private PostgreSQL server (ThrowawayPostgres, started here). Events go to
1000 persistence ids round-robin, one id per append, ~100-byte JSON payloads.

What is timed:
- ordo: every Journal.append() plus the final journal.flush(), wall clock, so the figure
  covers durable `messages` rows and their tag_views rows. Events are built beforehand. Each
  append states the sequence nr it expects (0 for a new id), as eventsourcing's application
  states each aggregate's version: both check for concurrent writers.
- raw: executemany() of the same `messages` rows into ordo's own schema, one transaction per
  batch of 100; the "+ tag_views rows" line also inserts the tag_views row of each event in
  the same transaction (the data ordo writes for one tag, progress rows aside).
- eventsourcing application: only the app.save() calls (the aggregate methods that trigger
  the events run outside the clock), with the library's defaults.
- eventsourcing recorder: app.recorder.insert_events() with batches of 100 StoredEvents.

A benchmark reports; it exits 0 whether the targets are met or not.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import ExitStack, closing
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import psycopg

from _args import positive_count
from _eventsourcing import LIBRARIES, Order, events_table, eventsourcing_app, stored_event_batches
from _places import Place, PostgresBackend, PostgresPlace, SQLiteBackend, SQLitePlace
from _postgres import bench_postgres
from _report import Row, machine_lines, print_table, ratio_row
from _workload import PERSISTENCE_IDS, payload, payload_bytes, persistence_id
from ordo import EventsByTagSettings, NewEvent, open_journal
from ordo.clock import SystemClock
from ordo.hashing import stable_hash
from ordo.storage.migration import load_migrations
from ordo.time import TimeUUIDGenerator

BATCH = 100
TAGS = ("order", "currency-eur", "shop-7")
DEFAULT_EVENTS = 100_000
DEFAULT_SINGLE_EVENTS = 10_000
QUICK_EVENTS = 2_000
QUICK_SINGLE_EVENTS = 500
RAW_TARGET = 0.60
EVENTSOURCING_TARGET = 2.0

_MESSAGES_INSERT = (
    "INSERT INTO messages (persistence_id, sequence_nr, timeuuid, writer_uuid, serializer, "
    "manifest, payload, metadata, tags) VALUES ({})".format(", ".join(["{p}"] * 9))
)
_TAG_VIEWS_INSERT = (
    "INSERT INTO tag_views (tag, timebucket, timeuuid, persistence_id, tag_pid_sequence_nr, "
    "sequence_nr, persistence_id_hash, writer_uuid, serializer, manifest, payload, metadata, "
    "tags) VALUES ({})".format(", ".join(["{p}"] * 13))
)

MessageRow = tuple[str, int, bytes, str, str, str, bytes, str | None, str]
TagViewRow = tuple[str, int, bytes, str, int, int, int, str, str, str, bytes, str | None, str]


@dataclass(frozen=True, slots=True)
class RawBatch:
    """The rows of one append: its `messages` rows and the tag_views rows of its one tag."""

    messages: list[MessageRow]
    tag_views: list[TagViewRow]


# --- the workload -------------------------------------------------------------------------


def plan(events: int, batch: int) -> list[range]:
    """Event numbers per append; append k goes to persistence_id(k)."""
    return [range(start, start + batch) for start in range(0, events - events % batch, batch)]


def raw_batches(events: int, batch: int) -> list[RawBatch]:
    """The rows ordo writes for the 1-tag workload, per append (tag_write_progress aside)."""
    uuids = TimeUUIDGenerator(SystemClock())
    bucket_size = EventsByTagSettings().bucket_size
    writer = str(uuid.uuid4())
    highest: dict[str, int] = {}
    batches = []
    for k, numbers in enumerate(plan(events, batch)):
        pid = persistence_id(k)
        pid_hash = stable_hash(pid)
        raw = RawBatch([], [])
        for i in numbers:
            seq = highest[pid] = highest.get(pid, 0) + 1
            offset = uuids.next()
            timeuuid = offset.to_bytes()
            data = payload_bytes(i)
            tags = json.dumps({TAGS[0]: seq}, separators=(",", ":"))
            raw.messages.append((pid, seq, timeuuid, writer, "json", "", data, None, tags))
            bucket = bucket_size.key(offset.epoch_ms)
            key = (TAGS[0], bucket, timeuuid, pid, seq, seq, pid_hash)
            raw.tag_views.append((*key, writer, "json", "", data, None, tags))
        batches.append(raw)
    return batches


# --- where the data goes -------------------------------------------------------------------


class RawPlace(Place, Protocol):
    def insert_raw(self, batches: Sequence[RawBatch], *, with_tag_views: bool) -> float: ...


class Backend(Protocol):
    name: str

    def new_place(self, label: str) -> RawPlace: ...


@dataclass(frozen=True, slots=True)
class SQLiteRawPlace(SQLitePlace):
    def insert_raw(self, batches: Sequence[RawBatch], *, with_tag_views: bool) -> float:
        """sqlite3 executemany, one transaction per batch, on ordo's schema and pragmas."""
        with closing(sqlite3.connect(self.path, isolation_level=None)) as conn:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            for statement in ordo_schema("ordo.storage.sqlite"):
                conn.execute(statement)
            messages = _MESSAGES_INSERT.format(p="?")
            tag_views = _TAG_VIEWS_INSERT.format(p="?")
            start = time.perf_counter()
            for raw in batches:
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany(messages, raw.messages)
                if with_tag_views:
                    conn.executemany(tag_views, raw.tag_views)
                conn.execute("COMMIT")
            return time.perf_counter() - start


class PostgresRawPlace(PostgresPlace):
    def insert_raw(self, batches: Sequence[RawBatch], *, with_tag_views: bool) -> float:
        """psycopg cursor.executemany, one transaction per batch, on ordo's schema."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            for statement in ordo_schema("ordo.storage.postgres"):
                conn.execute(statement.encode())
            messages = _MESSAGES_INSERT.format(p="%s")
            tag_views = _TAG_VIEWS_INSERT.format(p="%s")
            with conn.cursor() as cursor:
                start = time.perf_counter()
                for raw in batches:
                    with conn.transaction():
                        cursor.executemany(messages, raw.messages)
                        if with_tag_views:
                            cursor.executemany(tag_views, raw.tag_views)
                return time.perf_counter() - start


def ordo_schema(package: str) -> list[str]:
    """Every CREATE statement of ordo's migrations, so the raw tables match ordo's exactly."""
    return [statement for m in load_migrations(package) for statement in m.statements]


# --- the runs ------------------------------------------------------------------------------


def run_ordo(
    place: Place, *, events: int, batch: int, tags: int, profiler: cProfile.Profile | None = None
) -> float:
    """Events/s of Journal.append() plus the final flush(); `profiler` sees only that part."""
    work = [
        (persistence_id(k), [NewEvent.of(payload(i), tags=TAGS[:tags]) for i in numbers])
        for k, numbers in enumerate(plan(events, batch))
    ]
    highest: dict[str, int] = {}
    journal = open_journal(place.ordo_url, settings=EventsByTagSettings())
    try:
        if profiler is not None:
            profiler.enable()
        start = time.perf_counter()
        for pid, chunk in work:
            highest[pid] = journal.append(
                pid, chunk, expected_sequence_nr=highest.get(pid, 0)
            ).last_sequence_nr
        journal.flush()
        elapsed = time.perf_counter() - start
    finally:
        if profiler is not None:
            profiler.disable()
        journal.close()
    written = len(work) * batch
    _check(place, "messages", written)
    _check(place, "tag_views", written * tags)
    return written / elapsed


def run_raw(place: RawPlace, *, events: int, with_tag_views: bool = False) -> float:
    batches = raw_batches(events, BATCH)
    elapsed = place.insert_raw(batches, with_tag_views=with_tag_views)
    written = sum(len(raw.messages) for raw in batches)
    _check(place, "messages", written)
    _check(place, "tag_views", written if with_tag_views else 0)
    return written / elapsed


def run_eventsourcing_app(place: Place, *, events: int, batch: int) -> float:
    """Events/s of app.save(aggregate), each save carrying `batch` new events."""
    aggregates: dict[str, Order] = {}
    elapsed = 0.0
    written = 0
    with eventsourcing_app(place.eventsourcing_env()) as app:
        for k, numbers in enumerate(plan(events, batch)):
            pid = persistence_id(k)
            for i in numbers:
                if pid in aggregates:
                    aggregates[pid].add_line(**payload(i))  # type: ignore[arg-type]
                else:
                    aggregates[pid] = Order(**payload(i))  # type: ignore[arg-type]
            start = time.perf_counter()
            app.save(aggregates[pid])
            elapsed += time.perf_counter() - start
            written += len(numbers)
        table = events_table(app)
    _check(place, table, written)
    return written / elapsed


def run_eventsourcing_recorder(place: Place, *, events: int) -> float:
    """Events/s of the application recorder's insert_events(), batches of BATCH."""
    batches = list(stored_event_batches(plan(events, BATCH)))
    with eventsourcing_app(place.eventsourcing_env()) as app:
        start = time.perf_counter()
        for stored in batches:
            app.recorder.insert_events(stored)
        elapsed = time.perf_counter() - start
        table = events_table(app)
    written = sum(map(len, batches))
    _check(place, table, written)
    return written / elapsed


def _check(place: Place, table: str, expected: int) -> None:
    found = place.count(table)
    if found != expected:
        msg = f"{table}: expected {expected} rows after the run, found {found}"
        raise RuntimeError(msg)


# --- the table -----------------------------------------------------------------------------


def measure(
    backend: Backend, label: str, run: Callable[[RawPlace], float], *, repeat: int
) -> float:
    """The best of `repeat` runs, each on an empty database."""
    rates = []
    for attempt in range(1, repeat + 1):
        place = backend.new_place(label)
        try:
            rates.append(run(place))
        finally:
            place.discard()
        print(
            f"  {backend.name}: {label} run {attempt}/{repeat}: {rates[-1]:,.0f} events/s",
            file=sys.stderr,
            flush=True,
        )
    return max(rates)


def bench_backend(backend: Backend, *, events: int, single_events: int, repeat: int) -> list[Row]:
    name = backend.name
    rows: list[Row] = []
    unit = "events/s" if repeat == 1 else f"events/s, best of {repeat}"

    def record(figure: str, label: str, run: Callable[[RawPlace], float]) -> float:
        rate = measure(backend, label, run, repeat=repeat)
        rows.append(Row(f"{name}: {figure}", f"{rate:,.0f}", unit))
        return rate

    ordo = record(
        f"ordo append, batch {BATCH}, 1 tag",
        "ordo-b100-t1",
        lambda p: run_ordo(p, events=events, batch=BATCH, tags=1),
    )
    record(
        f"ordo append, batch {BATCH}, {len(TAGS)} tags",
        "ordo-b100-t3",
        lambda p: run_ordo(p, events=events, batch=BATCH, tags=len(TAGS)),
    )
    record(
        "ordo append, batch 1, 1 tag",
        "ordo-b1-t1",
        lambda p: run_ordo(p, events=single_events, batch=1, tags=1),
    )
    record(
        f"ordo append, batch 1, {len(TAGS)} tags",
        "ordo-b1-t3",
        lambda p: run_ordo(p, events=single_events, batch=1, tags=len(TAGS)),
    )
    raw = record(f"raw executemany, batch {BATCH}", "raw", lambda p: run_raw(p, events=events))
    record(
        f"raw executemany, batch {BATCH}, + tag_views rows",
        "raw-tag-views",
        lambda p: run_raw(p, events=events, with_tag_views=True),
    )
    app = record(
        f"eventsourcing app.save, {BATCH} events/save",
        "es-app-b100",
        lambda p: run_eventsourcing_app(p, events=events, batch=BATCH),
    )
    record(
        "eventsourcing app.save, 1 event/save",
        "es-app-b1",
        lambda p: run_eventsourcing_app(p, events=single_events, batch=1),
    )
    record(
        f"eventsourcing recorder.insert_events, batch {BATCH}",
        "es-recorder",
        lambda p: run_eventsourcing_recorder(p, events=events),
    )
    rows.append(
        ratio_row(f"{name}: ordo / raw (1 tag, batch {BATCH})", ordo / raw, target=RAW_TARGET)
    )
    rows.append(
        ratio_row(
            f"{name}: ordo / eventsourcing app (batch {BATCH})",
            ordo / app,
            target=EVENTSOURCING_TARGET,
        )
    )
    return rows


def profile_ordo(backend: Backend, *, events: int) -> None:
    """cProfile one ordo batch-100 1-tag run (main thread only) and print where time goes."""
    place = backend.new_place("profile")
    profiler = cProfile.Profile()
    try:
        rate = run_ordo(place, events=events, batch=BATCH, tags=1, profiler=profiler)
    finally:
        place.discard()
    print(f"{backend.name}: ordo append, batch {BATCH}, 1 tag, {events} events:")
    print(f"  {rate:,.0f} events/s under the profiler; main thread only (not the tag flusher)")
    stats = pstats.Stats(profiler).strip_dirs()
    stats.sort_stats("cumulative").print_stats(30)
    stats.sort_stats("tottime").print_stats(20)
    stats.sort_stats("cumulative").print_callees(r"\(append\)|write_events|_flush_locked")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument(
        "--events", type=positive_count, default=None, help=f"events per batch-{BATCH} figure"
    )
    parser.add_argument(
        "--single-events", type=positive_count, default=None, help="per batch-1 figure"
    )
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument(
        "--repeat", type=positive_count, default=1, help="runs per figure; the best counts"
    )
    parser.add_argument(
        "--profile", action="store_true", help=f"only cProfile ordo (batch {BATCH}, 1 tag)"
    )
    args = parser.parse_args(argv)
    events = args.events or (QUICK_EVENTS if args.quick else DEFAULT_EVENTS)
    single_events = args.single_events or (
        QUICK_SINGLE_EVENTS if args.quick else DEFAULT_SINGLE_EVENTS
    )
    if events < BATCH:
        parser.error(f"--events must be at least {BATCH}")
    rows: list[Row] = []
    postgres_version = "not run"
    started = time.perf_counter()
    with ExitStack() as stack:
        backends: list[Backend] = []
        if args.backend in ("sqlite", "both"):
            root = stack.enter_context(tempfile.TemporaryDirectory(prefix="ordo-bench-"))
            backends.append(SQLiteBackend(Path(root), SQLiteRawPlace))
        if args.backend in ("postgres", "both"):
            print("starting a throwaway PostgreSQL ...", file=sys.stderr, flush=True)
            server = stack.enter_context(bench_postgres())
            postgres_version = server.version
            backends.append(PostgresBackend(server, PostgresRawPlace))
        if args.profile:
            for backend in backends:
                profile_ordo(backend, events=events)
            return 0
        print("\n".join(machine_lines(postgres_version=postgres_version, libraries=LIBRARIES)))
        print(
            f"workload:   {events} events per batch-{BATCH} figure, {single_events} per batch-1"
            f" figure; {PERSISTENCE_IDS} persistence ids round-robin; "
            f"{len(payload_bytes(0))}-byte JSON payload"
        )
        print(
            "durability: sqlite WAL; ordo and raw use synchronous=NORMAL, eventsourcing its"
            " default (FULL); the throwaway postgres runs fsync=off, synchronous_commit=off"
        )
        print(flush=True)
        for backend in backends:
            rows.extend(
                bench_backend(
                    backend, events=events, single_events=single_events, repeat=args.repeat
                )
            )
    print_table(rows)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
