"""Events-by-tag read throughput and live latency of ordo against the raw driver and eventsourcing.

    .venv/bin/python bench/query.py [--backend sqlite|postgres|both] [--events N] [--quick]
    .venv/bin/python bench/query.py --profile      # cProfile ordo's current() on SQLite

Every backend gets fresh databases: SQLite files in a temp dir, or fresh databases on one
private PostgreSQL server (ThrowawayPostgres, started here).

The data: N events with one tag ("order"), ~100-byte JSON payloads, over 1000 persistence ids,
appended with Journal.append() in batches of 1000 events (max_message_batch_size=1000), then
journal.flush(). eventsourcing gets the same N events in its own database through
recorder.insert_events() (batches of 1000 StoredEvents, Order.LineAdded topics). After
populating, each database is warmed by one untimed scan (PostgreSQL: VACUUM ANALYZE first, as
autovacuum would), so every timed read finds the data cached. With --repeat N, N rounds each
run every read figure once, back to back, and each figure keeps its best: the figures a ratio
compares are measured under the same machine load.

What is timed (one figure = one full read of all N events, events/s):
- ordo current(): EventsByTag.current("order") from NoOffset with eventual_consistency_delay=0
  and first_time_bucket one hour back, consuming every envelope. "lazy" leaves the payload
  undecoded (decoding is lazy on purpose); "decoded" also reads envelope.payload.
- raw: the same tag_views columns and order as ordo's read, with the plain driver, pages of
  5000: keyset paging on (timebucket, timeuuid), and one cursor read with fetchmany(5000)
  (a server-side cursor on PostgreSQL). Rows are counted, not decoded. The ratio uses the
  faster of the two.
- eventsourcing: recorder.select_notifications() pages of 5000 (undecoded), and the same with
  app.mapper.to_domain_event() on every notification (decoded).
- live latency: one live() query consumed in a thread; the main thread appends one event every
  20 ms with flush_interval 0; latency = time of delivery - time just before append(). With
  pubsub on and off, each with an eventual_consistency_delay of 50 ms and of 5 s (500 ms with
  --quick: a smoke run need not wait 5 s four times per backend to show the delay's share).

A benchmark reports; it exits 0 whether the targets are met or not.
"""

from __future__ import annotations

import argparse
import cProfile
import math
import pstats
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack, closing
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Protocol

import psycopg

from _args import positive_count
from _eventsourcing import LIBRARIES, events_table, eventsourcing_app, stored_event_batches
from _places import Place, PostgresBackend, PostgresPlace, SQLiteBackend, SQLitePlace
from _postgres import bench_postgres
from _report import Row, machine_lines, print_table, ratio_row
from _workload import PERSISTENCE_IDS, payload, payload_bytes, persistence_id
from ordo import EventsByTagSettings, NewEvent, init_storage, open_journal
from ordo.settings import QuerySettings
from ordo.storage.open import events_by_tag_at
from ordo.time import format_first_time_bucket

TAG = "order"
APPEND_BATCH = 1000
PAGE = 5000
DEFAULT_EVENTS = 1_000_000
QUICK_EVENTS = 50_000
DEFAULT_LIVE_EVENTS = 200
QUICK_LIVE_EVENTS = 60
LIVE_INTERVAL_S = 0.020
RAW_TARGET = 0.40
EVENTSOURCING_TARGET = 2.0
LIVE_P99_TARGET_MS = 150.0
LIVE_DELAYS = (timedelta(milliseconds=50), timedelta(seconds=5))
"""The live queries' eventual_consistency_delay: the target's (50 ms) and a long one."""
QUICK_LIVE_DELAYS = (timedelta(milliseconds=50), timedelta(milliseconds=500))

_ENVELOPE_COLUMNS = (
    "timeuuid, persistence_id, tag_pid_sequence_nr, sequence_nr, serializer, manifest, payload, "
    "metadata, tags"
)
_ORDER = "ORDER BY timebucket, timeuuid, persistence_id, tag_pid_sequence_nr"
_SCAN = f"SELECT {_ENVELOPE_COLUMNS} FROM tag_views WHERE tag = {{p}} {_ORDER}"
_KEYSET_FIRST = (
    f"SELECT timebucket, {_ENVELOPE_COLUMNS} FROM tag_views WHERE tag = {{p}} {_ORDER} LIMIT {{p}}"
)
_KEYSET_NEXT = (
    f"SELECT timebucket, {_ENVELOPE_COLUMNS} FROM tag_views WHERE tag = {{p}} "
    f"AND (timebucket, timeuuid) > ({{p}}, {{p}}) {_ORDER} LIMIT {{p}}"
)


# --- the workload -------------------------------------------------------------------------


def plan(events: int) -> list[range]:
    """Event numbers per append; append k goes to persistence_id(k)."""
    return [
        range(start, min(start + APPEND_BATCH, events)) for start in range(0, events, APPEND_BATCH)
    ]


def first_time_bucket() -> str:
    """An hour before now: queries start there instead of walking every bucket since 2015."""
    return format_first_time_bucket(time.time_ns() // 1_000_000 - 3_600_000)


# --- where the data goes -------------------------------------------------------------------


class ScanPlace(Place, Protocol):
    def warm(self, table: str) -> None: ...

    def scan_keyset(self) -> int: ...

    def scan_cursor(self) -> int: ...

    def explain(self) -> str: ...


class Backend(Protocol):
    name: str

    def new_place(self, label: str) -> ScanPlace: ...


@dataclass(frozen=True, slots=True)
class SQLiteScanPlace(SQLitePlace):
    def warm(self, table: str) -> None:
        """Read every row once so that the file is in the page cache."""
        with closing(sqlite3.connect(self.path)) as conn:
            cursor = conn.execute(f"SELECT * FROM {table}")
            while cursor.fetchmany(PAGE):
                pass

    def scan_keyset(self) -> int:
        with closing(sqlite3.connect(self.path)) as conn:
            rows = conn.execute(_KEYSET_FIRST.format(p="?"), (TAG, PAGE)).fetchall()
            count = len(rows)
            query = _KEYSET_NEXT.format(p="?")
            while len(rows) == PAGE:
                rows = conn.execute(query, (TAG, rows[-1][0], rows[-1][1], PAGE)).fetchall()
                count += len(rows)
            return count

    def scan_cursor(self) -> int:
        with closing(sqlite3.connect(self.path)) as conn:
            cursor = conn.execute(_SCAN.format(p="?"), (TAG,))
            count = 0
            while rows := cursor.fetchmany(PAGE):
                count += len(rows)
            return count

    def explain(self) -> str:
        with closing(sqlite3.connect(self.path)) as conn:
            plans = [
                " ".join(str(row[-1]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))
                for sql, params in (
                    (_SCAN.format(p="?"), (TAG,)),
                    (_KEYSET_NEXT.format(p="?"), (TAG, 0, b"", PAGE)),
                )
            ]
        return " | ".join(plans)


class PostgresScanPlace(PostgresPlace):
    def warm(self, table: str) -> None:
        """VACUUM ANALYZE (hint bits, visibility map, statistics), then read every row once."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"VACUUM ANALYZE {table}".encode())
            with conn.transaction(), conn.cursor(name="warm") as cursor:
                cursor.execute(f"SELECT * FROM {table}".encode())
                while cursor.fetchmany(PAGE):
                    pass

    def scan_keyset(self) -> int:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            rows = conn.execute(_KEYSET_FIRST.format(p="%s").encode(), (TAG, PAGE)).fetchall()
            count = len(rows)
            query = _KEYSET_NEXT.format(p="%s").encode()
            while len(rows) == PAGE:
                rows = conn.execute(query, (TAG, rows[-1][0], rows[-1][1], PAGE)).fetchall()
                count += len(rows)
            return count

    def scan_cursor(self) -> int:
        """One server-side cursor, fetchmany(PAGE) at a time."""
        with (
            psycopg.connect(self.dsn) as conn,
            conn.cursor(name="scan") as cursor,
        ):
            cursor.execute(_SCAN.format(p="%s").encode(), (TAG,))
            count = 0
            while rows := cursor.fetchmany(PAGE):
                count += len(rows)
            return count

    def explain(self) -> str:
        with psycopg.connect(self.dsn) as conn:
            plans = [
                " ".join(
                    str(row[0]).strip()
                    for row in conn.execute(f"EXPLAIN {sql}".encode(), params).fetchall()[:2]
                )
                for sql, params in (
                    (_SCAN.format(p="%s"), (TAG,)),
                    (_KEYSET_NEXT.format(p="%s"), (TAG, 0, b"", PAGE)),
                )
            ]
        return " | ".join(plans)


def _check(found: int, expected: int, what: str) -> None:
    if found != expected:
        msg = f"{what}: expected {expected} events, found {found}"
        raise RuntimeError(msg)


# --- ordo ----------------------------------------------------------------------------------


def populate_ordo(place: Place, *, events: int, threads: int) -> float:
    """Append the events (batches of APPEND_BATCH, `threads` appenders); the seconds it took.

    Only append() and the final flush() are timed; each batch is built just before its append.
    """
    settings = EventsByTagSettings(
        first_time_bucket=first_time_bucket(), max_message_batch_size=APPEND_BATCH
    )
    appends = list(enumerate(plan(events)))
    elapsed = [0.0] * threads
    failures: list[BaseException] = []
    journal = open_journal(place.ordo_url, settings=settings)

    def append_share(worker: int) -> None:
        try:
            for k, numbers in appends[worker::threads]:
                batch = [NewEvent.of(payload(i), tags=(TAG,)) for i in numbers]
                start = time.perf_counter()
                journal.append(persistence_id(k), batch)
                elapsed[worker] += time.perf_counter() - start
        except BaseException as exc:
            failures.append(exc)
            raise

    try:
        started = time.perf_counter()
        if threads == 1:
            append_share(0)
            total = elapsed[0]
        else:
            workers = [threading.Thread(target=append_share, args=(w,)) for w in range(threads)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            total = time.perf_counter() - started
        if failures:
            raise failures[0]
        start = time.perf_counter()
        journal.flush()
        total += time.perf_counter() - start
    finally:
        journal.close()
    _check(place.count("tag_views"), events, "tag_views after populating")
    return total


def read_ordo(
    place: Place,
    *,
    events: int,
    page_size: int,
    decode: bool,
    profiler: cProfile.Profile | None = None,
) -> float:
    """Events/s of one current() over the whole tag; only the iteration is timed."""
    settings = QuerySettings(eventual_consistency_delay=timedelta(0), page_size=page_size)
    tag_settings = EventsByTagSettings(first_time_bucket=first_time_bucket())
    count = 0
    with events_by_tag_at(place.ordo_url, settings=settings, events_by_tag=tag_settings) as query:
        if profiler is not None:
            profiler.enable()
        start = time.perf_counter()
        with query.current(TAG) as stream:
            if decode:
                for envelope in stream:
                    envelope.payload  # noqa: B018 - decoding is what is measured
                    count += 1
            else:
                for _ in stream:
                    count += 1
        elapsed = time.perf_counter() - start
        if profiler is not None:
            profiler.disable()
    _check(count, events, "ordo current()")
    return count / elapsed


def read_raw(place: ScanPlace, *, events: int, keyset: bool) -> float:
    start = time.perf_counter()
    count = place.scan_keyset() if keyset else place.scan_cursor()
    elapsed = time.perf_counter() - start
    _check(count, events, "raw scan")
    return count / elapsed


# --- eventsourcing -------------------------------------------------------------------------


def populate_eventsourcing(place: Place, *, events: int) -> tuple[float, str]:
    """insert_events() in batches of APPEND_BATCH; (seconds it took, the events table)."""
    elapsed = 0.0
    with eventsourcing_app(place.eventsourcing_env()) as app:
        for stored in stored_event_batches(plan(events)):
            start = time.perf_counter()
            app.recorder.insert_events(stored)
            elapsed += time.perf_counter() - start
        table = events_table(app)
    _check(place.count(table), events, f"{table} after populating")
    return elapsed, table


def read_eventsourcing(place: Place, *, events: int, decode: bool) -> float:
    """Events/s of reading the notification log in pages of PAGE, optionally decoded."""
    count = 0
    with eventsourcing_app(place.eventsourcing_env()) as app:
        recorder, mapper = app.recorder, app.mapper
        start = time.perf_counter()
        after: int | None = None
        while True:
            page = recorder.select_notifications(after, limit=PAGE, inclusive_of_start=False)
            if decode:
                for notification in page:
                    mapper.to_domain_event(notification)
            count += len(page)
            if len(page) < PAGE:
                break
            after = page[-1].id
        elapsed = time.perf_counter() - start
    _check(count, events, "eventsourcing select_notifications()")
    return count / elapsed


# --- live latency --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Latency:
    p50_ms: float
    p99_ms: float
    delivered: int
    appended: int


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of ascending values."""
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


def run_live(place: Place, *, events: int, pubsub: bool, delay: timedelta) -> Latency:
    """Latency from just before append() to delivery by a live query in another thread."""
    query_settings = QuerySettings(eventual_consistency_delay=delay)
    tag_settings = EventsByTagSettings(
        first_time_bucket=first_time_bucket(),
        flush_interval=timedelta(0),
        pubsub_notification=pubsub,
    )
    pid = "live-0001"
    appended: dict[int, int] = {}
    delivered: dict[int, int] = {}
    finished = threading.Event()
    init_storage(place.ordo_url)  # the query starts before the first append
    with events_by_tag_at(
        place.ordo_url, settings=query_settings, events_by_tag=tag_settings
    ) as query:
        stream = query.live(TAG)

        def consume() -> None:
            try:
                for envelope in stream:
                    delivered[envelope.sequence_nr] = time.perf_counter_ns()
                    if len(delivered) >= events:
                        break
            finally:
                finished.set()

        consumer = threading.Thread(target=consume, name="bench-live-consumer", daemon=True)
        consumer.start()
        journal = open_journal(place.ordo_url, settings=tag_settings)
        try:
            journal.recover(pid)  # the first append would otherwise pay for recovery
            start = time.perf_counter()
            for i in range(events):
                pause = start + i * LIVE_INTERVAL_S - time.perf_counter()
                if pause > 0:
                    time.sleep(pause)
                at = time.perf_counter_ns()
                receipt = journal.append(pid, [NewEvent.of({"i": i}, tags=(TAG,))])
                appended[receipt.first_sequence_nr] = at
            timeout = delay.total_seconds() + query_settings.refresh_interval.total_seconds() + 30
            finished.wait(timeout)
        finally:
            stream.close()
            consumer.join(10)
            journal.close()
    latencies = sorted((delivered[nr] - at) / 1e6 for nr, at in appended.items() if nr in delivered)
    if not latencies:
        return Latency(math.nan, math.nan, 0, len(appended))
    return Latency(
        percentile(latencies, 0.50), percentile(latencies, 0.99), len(latencies), len(appended)
    )


# --- the table -----------------------------------------------------------------------------


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True, slots=True)
class Figure:
    key: str
    label: str
    run: Callable[[], float]


def best_per_figure(name: str, figures: Sequence[Figure], *, repeat: int) -> dict[str, float]:
    """Run every figure once per round, `repeat` rounds; the best rate of each figure.

    Rounds rather than back-to-back repeats: on a shared machine the figures that a ratio
    compares are then measured under the same load.
    """
    best: dict[str, float] = {}
    for attempt in range(1, repeat + 1):
        for figure in figures:
            rate = figure.run()
            best[figure.key] = max(rate, best.get(figure.key, 0.0))
            log(f"  {name}: {figure.label} run {attempt}/{repeat}: {rate:,.0f} events/s")
    return best


def bench_reads(backend: Backend, *, events: int, threads: int, repeat: int) -> list[Row]:
    name = backend.name
    unit = "events/s" if repeat == 1 else f"events/s, best of {repeat}"
    ordo_place = backend.new_place("ordo")
    es_place = backend.new_place("es")
    try:
        log(f"{name}: populating ordo with {events:,} events ...")
        ordo_seconds = populate_ordo(ordo_place, events=events, threads=threads)
        log(f"{name}: populating eventsourcing with {events:,} events ...")
        es_seconds, table = populate_eventsourcing(es_place, events=events)
        ordo_place.warm("tag_views")
        es_place.warm(table)
        log(f"{name}: raw query plans: {ordo_place.explain()}")
        cursor_kind = "server-side cursor" if name == "postgres" else "one cursor"
        figures = [
            Figure(
                "lazy",
                "ordo current(), page 500, lazy",
                lambda: read_ordo(ordo_place, events=events, page_size=500, decode=False),
            ),
            Figure(
                "lazy-5000",
                "ordo current(), page 5000, lazy",
                lambda: read_ordo(ordo_place, events=events, page_size=5000, decode=False),
            ),
            Figure(
                "decoded",
                "ordo current(), page 500, payload decoded",
                lambda: read_ordo(ordo_place, events=events, page_size=500, decode=True),
            ),
            Figure(
                "keyset",
                f"raw scan, keyset pages of {PAGE}",
                lambda: read_raw(ordo_place, events=events, keyset=True),
            ),
            Figure(
                "cursor",
                f"raw scan, {cursor_kind}, fetchmany({PAGE})",
                lambda: read_raw(ordo_place, events=events, keyset=False),
            ),
            Figure(
                "es",
                f"eventsourcing select_notifications, pages of {PAGE}",
                lambda: read_eventsourcing(es_place, events=events, decode=False),
            ),
            Figure(
                "es-decoded",
                f"eventsourcing select_notifications + to_domain_event, pages of {PAGE}",
                lambda: read_eventsourcing(es_place, events=events, decode=True),
            ),
        ]
        best = best_per_figure(name, figures, repeat=repeat)
    finally:
        ordo_place.discard()
        es_place.discard()
    appenders = "" if threads == 1 else f", {threads} appending threads"
    rows = [
        Row(
            f"{name}: populate ordo (Journal.append, {APPEND_BATCH}/append{appenders})",
            f"{ordo_seconds:,.1f}",
            f"s ({events / ordo_seconds:,.0f} events/s; {events:,} events)",
        ),
        Row(
            f"{name}: populate eventsourcing (insert_events, {APPEND_BATCH}/call)",
            f"{es_seconds:,.1f}",
            f"s ({events / es_seconds:,.0f} events/s)",
        ),
    ]
    rows.extend(Row(f"{name}: {f.label}", f"{best[f.key]:,.0f}", unit) for f in figures)
    lazy, keyset, cursor = best["lazy"], best["keyset"], best["cursor"]
    raw_kind = "keyset" if keyset >= cursor else "cursor"
    rows.append(
        ratio_row(
            f"{name}: ordo current (page 500, lazy) / raw ({raw_kind})",
            lazy / max(keyset, cursor),
            target=RAW_TARGET,
        )
    )
    if raw_kind == "cursor":
        rows.append(
            Row(
                f"{name}: ordo current (page 500, lazy) / raw (keyset)",
                f"{lazy / keyset:.2f}",
                "x (informative: ordo pages by key too)",
            )
        )
    rows.append(
        ratio_row(
            f"{name}: ordo current (page 500, lazy) / eventsourcing decoded",
            lazy / best["es-decoded"],
            target=EVENTSOURCING_TARGET,
        )
    )
    rows.append(
        Row(
            f"{name}: ordo current (page 500, decoded) / eventsourcing decoded",
            f"{best['decoded'] / best['es-decoded']:.2f}",
            "x (informative)",
        )
    )
    return rows


def bench_live(backend: Backend, *, events: int, delays: Sequence[timedelta]) -> list[Row]:
    rows: list[Row] = []
    for pubsub in (True, False):
        for delay in delays:
            label = f"pubsub {'on' if pubsub else 'off'}, delay {_duration(delay)}"
            log(f"{backend.name}: live latency, {label}, {events} events ...")
            place = backend.new_place("live")
            try:
                latency = run_live(place, events=events, pubsub=pubsub, delay=delay)
            finally:
                place.discard()
            lost = latency.appended - latency.delivered
            rows.append(
                Row(
                    f"{backend.name}: live latency, {label}",
                    f"{latency.p50_ms:,.1f} / {latency.p99_ms:,.1f}",
                    f"ms p50 / p99 ({latency.delivered} events"
                    + (f", {lost} NOT DELIVERED)" if lost else ")"),
                )
            )
            if backend.name == "sqlite" and pubsub and delay == timedelta(milliseconds=50):
                verdict = "PASS" if latency.p99_ms <= LIVE_P99_TARGET_MS and not lost else "MISS"
                rows.append(
                    Row(
                        f"{backend.name}: live p99, {label}",
                        f"{latency.p99_ms:,.1f}",
                        f"ms (target <= {LIVE_P99_TARGET_MS:.0f}) {verdict}",
                    )
                )
    return rows


def _duration(delay: timedelta) -> str:
    ms = delay // timedelta(milliseconds=1)
    return f"{ms} ms" if ms < 1000 else f"{ms // 1000} s"


def profile_ordo(backend: Backend, *, events: int) -> None:
    """cProfile one current() (page 500, lazy) over `events` events and print the top."""
    place = backend.new_place("profile")
    profiler = cProfile.Profile()
    try:
        populate_ordo(place, events=events, threads=1)
        place.warm("tag_views")
        rate = read_ordo(place, events=events, page_size=500, decode=False)
        print(f"{backend.name}: ordo current(), page 500, lazy, {events:,} events")
        print(f"  {rate:,.0f} events/s without the profiler")
        rate = read_ordo(place, events=events, page_size=500, decode=False, profiler=profiler)
        print(f"  {rate:,.0f} events/s under the profiler")
    finally:
        place.discard()
    stats = pstats.Stats(profiler).strip_dirs()
    stats.sort_stats("tottime").print_stats(15)
    stats.sort_stats("cumulative").print_stats(15)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument(
        "--events", type=positive_count, default=None, help="events read per figure"
    )
    parser.add_argument(
        "--live-events", type=positive_count, default=None, help="events per live run"
    )
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument(
        "--repeat", type=positive_count, default=1, help="runs per figure; the best counts"
    )
    parser.add_argument(
        "--threads", type=positive_count, default=1, help="appending threads while populating ordo"
    )
    parser.add_argument(
        "--profile", action="store_true", help="only cProfile ordo's current() on SQLite"
    )
    args = parser.parse_args(argv)
    events = args.events or (QUICK_EVENTS if args.quick else DEFAULT_EVENTS)
    live_events = args.live_events or (QUICK_LIVE_EVENTS if args.quick else DEFAULT_LIVE_EVENTS)
    live_delays = QUICK_LIVE_DELAYS if args.quick else LIVE_DELAYS
    rows: list[Row] = []
    postgres_version = "not run"
    started = time.perf_counter()
    with ExitStack() as stack:
        root = stack.enter_context(tempfile.TemporaryDirectory(prefix="ordo-bench-query-"))
        if args.profile:
            profile_ordo(SQLiteBackend(Path(root), SQLiteScanPlace), events=events)
            return 0
        backends: list[Backend] = []
        if args.backend in ("sqlite", "both"):
            backends.append(SQLiteBackend(Path(root), SQLiteScanPlace))
        if args.backend in ("postgres", "both"):
            log("starting a throwaway PostgreSQL ...")
            server = stack.enter_context(bench_postgres())
            postgres_version = server.version
            backends.append(PostgresBackend(server, PostgresScanPlace))
        print("\n".join(machine_lines(postgres_version=postgres_version, libraries=LIBRARIES)))
        print(
            f"workload:   {events:,} events, one tag ({TAG!r}), {PERSISTENCE_IDS} persistence ids,"
            f" {APPEND_BATCH} events per append,"
            f" {len(payload_bytes(0))}-byte JSON payload;"
            f" live: {live_events} events, one every {LIVE_INTERVAL_S * 1000:.0f} ms"
        )
        print(
            "reads:      warm cache; ordo current() from NoOffset, eventual_consistency_delay 0;"
            f" raw and eventsourcing in pages of {PAGE}"
        )
        print(
            "live:       journal and query in one process, so pubsub wakes the query through the"
            " in-process notifier on both backends (on PostgreSQL the LISTEN/NOTIFY copy arrives"
            " later); cross-process latency is not measured here"
        )
        print(flush=True)
        for backend in backends:
            rows.extend(
                bench_reads(backend, events=events, threads=args.threads, repeat=args.repeat)
            )
            rows.extend(bench_live(backend, events=live_events, delays=live_delays))
    print_table(rows)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
