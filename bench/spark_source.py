"""Spark read throughput and latency of the `ordo_events_by_tag` source against baselines.

    .venv/bin/python bench/spark_source.py [--events N] [--quick] [--repeat N] [--profile]

One SQLite journal in a temp dir gets N events of one tag ("order"), ~100-byte JSON payloads,
over 1000 persistence ids, appended with Journal.append() in batches of 1000 events
(max_message_batch_size=1000). It is warmed by one untimed scan. Spark runs locally
(`ordo.spark.start_session(master="local[2]")`: UI and progress bar off, Python workers = this
interpreter).

What is timed (one figure = one full read of all N events into Spark's no-op sink, events/s):
- ordo stream: readStream.format("ordo_events_by_tag") with 1, 2 and 4 `segments`,
  trigger(availableNow=True), writeStream.format("noop"), a fresh checkpoint per run; N / wall
  time from start() to awaitTermination(). The rows of the query's progress must add up to N.
- ordo batch: spark.read.format("ordo_events_by_tag"), 2 segments, .write.format("noop").
- naive: a Python data source defined here (DataSource + DataSourceReader, registered with
  spark.dataSource.register), 1, 2 and 4 partitions splitting the rows by
  `persistence_id_hash % n`; each partition opens sqlite3 and yields plain Python tuples of the
  same columns as ordo's schema (EVENT_ROW_DDL), with no planning; batch read into "noop".
  Also as a stream with 2 partitions (one micro-batch of every row, availableNow), so that the
  stream is compared with a stream (both pay Spark's start of the source's Python process) and
  the batch read with a batch read; the targets hold for both pairs.
- parquet: the same rows written once (untimed) to Parquet with pyarrow, then
  spark.read.parquet(...).write.format("noop"): what the JVM does without Python.
- library current(): EventsByTag.current("order") with eventual_consistency_delay=0, consumed
  in this process (no Spark).
Before timing, every figure runs once, untimed, on a small journal of min(5,000, N) events
(JVM and Python workers warm; a small --events run stays quick). --quick skips this warm-up:
a smoke run's figures then include Spark's first jobs; it also runs the ordo stream and the
naive source with 1 and 2 segments or partitions only, not 4, and skips the quiet month's
untimed read below. With --repeat N, N rounds each run every figure once, back to back; each
figure keeps its best.

Then, on the same Spark session:
- empty micro-batch: a stream from startingOffsets "latest" on the populated journal, trigger
  processingTime 0, no new events; the mean durationMs["triggerExecution"] of ~10 no-data
  progress updates (spark.sql.streaming.noDataProgressEventInterval set to 0 so that every idle
  trigger reports).
- append-to-sink latency: a stream on a fresh journal (1 segment, processingTime 100 ms,
  eventualConsistencyDelayMs 50) into foreachBatch, which records time.time_ns() per row; the
  bench appends one event every 50 ms (flush_interval 0); latency = received - just before
  append(). One warm-up event is appended and received first; the mean durationMs of the
  micro-batches that carried the timed events is reported with it.

- quiet month: a minute journal (its own SQLite file) with one event 30 days ago and one now,
  read with spark.read.format("ordo_events_by_tag"), 1 segment, count(): seconds for the 2 rows.
  The batch's offsets span 43,200 empty minute buckets, which planner and executors jump over:
  the same read of a journal whose 2 events are a minute apart (run just before) is shown with
  it, and the quiet month should cost no more.

--profile adds a plain 2-segment stream and one through an instrumented copy of the source (a
subclass registered under another name), reporting time in the driver's latestOffset (the
planner), in the executors' read_partition (split into SQL + envelopes, Arrow building and
the rest), and what Spark spends around them. It runs last, because the instrumentation stays
in the reused Python workers.

A benchmark reports; it exits 0 whether the targets are met or not.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import ReadLimit
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import StructType

from _args import positive_count
from _report import Row, machine_lines, print_table, ratio_row
from _workload import PERSISTENCE_IDS, payload, payload_bytes, persistence_id
from ordo import BucketSize, EventsByTagSettings, NewEvent, open_journal
from ordo.clock import ManualClock
from ordo.settings import QuerySettings
from ordo.spark import start_session
from ordo.spark.events_by_tag_source import EventsByTagDataSource, EventsByTagStreamReader
from ordo.spark.options import EventsByTagOptions
from ordo.spark.reading import SCHEMA
from ordo.spark.schemas import EVENT_ROW_DDL
from ordo.storage.open import events_by_tag_at
from ordo.time import TimeUUID, format_first_time_bucket

TAG = "order"
APPEND_BATCH = 1000
DEFAULT_EVENTS = 1_000_000
QUICK_EVENTS = 50_000
WARM_UP_EVENTS = 5_000
SEGMENT_COUNTS = (1, 2, 4)
QUICK_SEGMENT_COUNTS = (1, 2)
"""--quick's: those the ratios compare (4 adds an ordo stream and a naive read, nothing new)."""
EMPTY_PROGRESS = 10
DEFAULT_LATENCY_EVENTS = 100
QUICK_LATENCY_EVENTS = 40
LATENCY_INTERVAL_S = 0.050
PARQUET_FILES = 4
NAIVE_TARGET = 2.0
SCALING_TARGET = 1.3
TIMINGS_OPTION = "benchTimings"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def first_time_bucket() -> str:
    """An hour before now: queries start there instead of walking every bucket since 2015."""
    return format_first_time_bucket(time.time_ns() // 1_000_000 - 3_600_000)


FIRST_TIME_BUCKET = first_time_bucket()


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of ascending values."""
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


# --- the journal ---------------------------------------------------------------------------


def populate(url: str, *, events: int) -> float:
    """Append the events, APPEND_BATCH per append(), round-robin over the persistence ids.

    Only append() and the final flush() are timed; each batch is built just before its append.
    """
    settings = EventsByTagSettings(
        first_time_bucket=FIRST_TIME_BUCKET, max_message_batch_size=APPEND_BATCH
    )
    elapsed = 0.0
    with open_journal(url, settings=settings) as journal:
        for k, start in enumerate(range(0, events, APPEND_BATCH)):
            batch = [
                NewEvent.of(payload(i), tags=(TAG,))
                for i in range(start, min(start + APPEND_BATCH, events))
            ]
            began = time.perf_counter()
            journal.append(persistence_id(k), batch)
            elapsed += time.perf_counter() - began
        began = time.perf_counter()
        journal.flush()
        elapsed += time.perf_counter() - began
    return elapsed


def count_rows(path: Path) -> int:
    with closing(sqlite3.connect(path)) as conn:
        return int(
            conn.execute("SELECT count(*) FROM tag_views WHERE tag = ?", (TAG,)).fetchone()[0]
        )


def warm(path: Path) -> None:
    """Read every row once so that the file is in the page cache."""
    with closing(sqlite3.connect(path)) as conn:
        cursor = conn.execute("SELECT * FROM tag_views")
        while cursor.fetchmany(5000):
            pass


def write_parquet(db: Path, directory: Path, *, events: int) -> None:
    """The tag's rows in ordo's row shape (reading.SCHEMA), in PARQUET_FILES files."""
    directory.mkdir()
    per_file = max(1, math.ceil(events / PARQUET_FILES))
    columns = (
        "timeuuid, persistence_id, sequence_nr, tag_pid_sequence_nr, persistence_id_hash, tags, "
        "manifest, serializer, payload, metadata"
    )
    with closing(sqlite3.connect(db)) as conn:
        cursor = conn.execute(
            f"SELECT {columns} FROM tag_views WHERE tag = ? ORDER BY timebucket, timeuuid", (TAG,)
        )
        part = 0
        while rows := cursor.fetchmany(per_file):
            offsets = [TimeUUID.from_bytes(r[0]) for r in rows]
            table = pa.Table.from_arrays(
                [
                    pa.array([str(o) for o in offsets], pa.string()),
                    pa.array([o.epoch_ns // 1000 for o in offsets], pa.timestamp("us", tz="UTC")),
                    pa.array([r[1] for r in rows], pa.string()),
                    pa.array([r[2] for r in rows], pa.int64()),
                    pa.array([r[3] for r in rows], pa.int64()),
                    pa.array([f"{r[4] & 1}/1" for r in rows], pa.string()),
                    pa.array([r[5] for r in rows], pa.string()),
                    pa.array([r[6] for r in rows], pa.string()),
                    pa.array([r[7] for r in rows], pa.string()),
                    pa.array([r[8] for r in rows], pa.binary()),
                    pa.array([r[9] for r in rows], pa.string()),
                ],
                schema=SCHEMA,
            )
            pq.write_table(table, directory / f"part-{part:02d}.parquet", row_group_size=50_000)
            part += 1


# --- the naive baseline source -------------------------------------------------------------


class NaiveTagSource(DataSource):
    """A tag's rows straight from SQLite as Python tuples: no planning, no Arrow."""

    @classmethod
    def name(cls) -> str:
        return "bench_naive_tag"

    def schema(self) -> str:
        return EVENT_ROW_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return NaiveTagReader(
            self.options["path"], self.options["tag"], int(self.options.get("partitions", "1"))
        )

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return NaiveTagStreamReader(
            self.options["path"], self.options["tag"], int(self.options.get("partitions", "1"))
        )


class NaiveTagReader(DataSourceReader):
    def __init__(self, path: str, tag: str, partitions: int) -> None:
        self.path = path
        self.tag = tag
        self.count = partitions

    def partitions(self) -> Sequence[InputPartition]:
        return [InputPartition(i) for i in range(self.count)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        return naive_rows(self.path, self.tag, self.count, partition.value)


class NaiveTagStreamReader(DataSourceStreamReader):
    """The naive source as a stream: one micro-batch of every row, then nothing new."""

    def __init__(self, path: str, tag: str, partitions: int) -> None:
        self.batch = NaiveTagReader(path, tag, partitions)

    def initialOffset(self) -> dict[str, int]:
        return {"read": 0}

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        return {"read": 1}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        return [] if start == end else self.batch.partitions()

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        return self.batch.read(partition)

    def commit(self, end: dict[str, int]) -> None:
        pass


def naive_rows(path: str, tag: str, count: int, index: int) -> Iterator[tuple[Any, ...]]:
    """One partition of the naive source: rows of `persistence_id_hash % count == index`."""
    import sqlite3  # executor side, as the style asks of sources

    from ordo.time import TimeUUID

    segment = f"{index}/{count}"
    conn = sqlite3.connect(path)
    try:
        cursor = conn.execute(
            "SELECT timeuuid, persistence_id, sequence_nr, tag_pid_sequence_nr, tags, "
            "manifest, serializer, payload, metadata FROM tag_views "
            "WHERE tag = ? AND persistence_id_hash % ? = ?",
            (tag, count, index),
        )
        while rows := cursor.fetchmany(5000):
            for key, pid, seq, tag_seq, tags, manifest, serializer, data, meta in rows:
                offset = TimeUUID.from_bytes(key)
                yield (
                    str(offset),
                    offset.datetime,
                    pid,
                    seq,
                    tag_seq,
                    segment,
                    tags,
                    manifest,
                    serializer,
                    data,
                    meta,
                )
    finally:
        conn.close()


# --- the instrumented ordo source (--profile) ----------------------------------------------


class TimedEventsByTagSource(EventsByTagDataSource):
    """ordo_events_by_tag, timing latestOffset and read; lines of JSON to `benchTimings`."""

    @classmethod
    def name(cls) -> str:
        return "bench_timed_ordo_events_by_tag"

    def schema(self) -> str:
        """The source's schema, without its parsing of the options: ours has benchTimings."""
        return EVENT_ROW_DDL

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        given = {k: v for k, v in self.options.items() if k.lower() != TIMINGS_OPTION.lower()}
        timings = next(v for k, v in self.options.items() if k.lower() == TIMINGS_OPTION.lower())
        return TimedStreamReader(EventsByTagOptions.from_spark(given), timings)


class TimedStreamReader(EventsByTagStreamReader):
    def __init__(self, options: EventsByTagOptions, timings: str) -> None:
        super().__init__(options)
        self.timings = timings

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options, "timings": self.timings}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self.timings = state["timings"]

    def _record(self, **fields: object) -> None:
        with open(self.timings, "a") as out:
            out.write(json.dumps({"pid": os.getpid(), **fields}) + "\n")

    def latestOffset(self, start: dict[str, Any], limit: Any) -> dict[str, Any]:
        began = time.perf_counter()
        end = super().latestOffset(start, limit)
        self._record(what="latestOffset", s=time.perf_counter() - began)
        return end

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        clock = _instrument_reading()
        clock["sql"] = clock["arrow"] = 0.0
        began = time.perf_counter()
        inside = 0.0
        rows = 0
        batches = super().read(partition)
        while True:
            step = time.perf_counter()
            try:
                batch = next(batches)
            except StopIteration:
                inside += time.perf_counter() - step
                break
            inside += time.perf_counter() - step
            rows += batch.num_rows
            yield batch
        self._record(
            what="read",
            wall=time.perf_counter() - began,
            inside=inside,
            sql=clock["sql"],
            arrow=clock["arrow"],
            rows=rows,
        )


def _instrument_reading() -> dict[str, float]:
    """Wrap reading._batch and the SQLite store's read_packed in this (worker) process."""
    from ordo.spark import reading
    from ordo.storage.sqlite.tag_view_store import SQLiteTagViewStore

    clock: dict[str, float] | None = getattr(reading, "_bench_clock", None)
    if clock is not None:
        return clock
    clock = {"sql": 0.0, "arrow": 0.0}
    build = reading._batch
    fetch = SQLiteTagViewStore.read_packed

    def timed_batch(*args: Any, **kwargs: Any) -> pa.RecordBatch:
        began = time.perf_counter()
        try:
            return build(*args, **kwargs)
        finally:
            clock["arrow"] += time.perf_counter() - began

    def timed_fetch(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return fetch(*args, **kwargs)
        finally:
            clock["sql"] += time.perf_counter() - began

    reading._batch = timed_batch
    SQLiteTagViewStore.read_packed = timed_fetch  # type: ignore[method-assign]
    reading._bench_clock = clock  # type: ignore[attr-defined]
    return clock


# --- the figures ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Setup:
    spark: SparkSession
    url: str
    db: Path
    parquet: Path
    scratch: Path
    events: int

    def checkpoint(self) -> str:
        return tempfile.mkdtemp(prefix="checkpoint-", dir=self.scratch)

    def options(self, **extra: str) -> dict[str, str]:
        return {
            "journal": self.url,
            "tag": TAG,
            "firstTimeBucket": FIRST_TIME_BUCKET,
            "eventualConsistencyDelayMs": "0",
            **extra,
        }


@dataclass(slots=True)
class StreamRun:
    rate: float
    durations_ms: dict[str, int]
    batches: int


def _check(found: int, expected: int, what: str) -> None:
    if found != expected:
        msg = f"{what}: expected {expected} events, found {found}"
        raise RuntimeError(msg)


def _stream(setup: Setup, frame: DataFrame, what: str) -> StreamRun:
    """Every row of `frame` (a stream) into the noop sink, availableNow, fresh checkpoint."""
    writer = (
        frame.writeStream.format("noop")
        .option("checkpointLocation", setup.checkpoint())
        .trigger(availableNow=True)
    )
    began = time.perf_counter()
    query = writer.start()
    query.awaitTermination()
    elapsed = time.perf_counter() - began
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    progress = query.recentProgress
    _check(sum(p.numInputRows for p in progress), setup.events, what)
    durations: dict[str, int] = {}
    for p in progress:
        for key, ms in p.durationMs.items():
            durations[key] = durations.get(key, 0) + ms
    batches = sum(1 for p in progress if p.numInputRows)
    return StreamRun(setup.events / elapsed, durations, batches)


def ordo_stream(setup: Setup, *, segments: int, source: str = "ordo_events_by_tag") -> StreamRun:
    options = setup.options(segments=str(segments))
    if source != "ordo_events_by_tag":
        options[TIMINGS_OPTION] = str(setup.scratch / "timings.jsonl")
    frame = setup.spark.readStream.format(source).options(**options).load()
    return _stream(setup, frame, f"ordo stream, {segments} seg")


def naive_stream(setup: Setup, *, partitions: int) -> float:
    frame = (
        setup.spark.readStream.format(NaiveTagSource.name())
        .options(path=str(setup.db), tag=TAG, partitions=str(partitions))
        .load()
    )
    return _stream(setup, frame, f"naive stream, {partitions} part").rate


def _noop(frame: DataFrame, events: int) -> float:
    began = time.perf_counter()
    frame.write.format("noop").mode("overwrite").save()
    return events / (time.perf_counter() - began)


def ordo_batch(setup: Setup, *, segments: int) -> float:
    frame = (
        setup.spark.read.format("ordo_events_by_tag")
        .options(**setup.options(segments=str(segments)))
        .load()
    )
    return _noop(frame, setup.events)


def naive(setup: Setup, *, partitions: int) -> float:
    frame = (
        setup.spark.read.format(NaiveTagSource.name())
        .options(path=str(setup.db), tag=TAG, partitions=str(partitions))
        .load()
    )
    return _noop(frame, setup.events)


def parquet(setup: Setup) -> float:
    return _noop(setup.spark.read.parquet(str(setup.parquet)), setup.events)


def library_current(setup: Setup) -> float:
    settings = QuerySettings(eventual_consistency_delay=timedelta(0))
    tag_settings = EventsByTagSettings(first_time_bucket=FIRST_TIME_BUCKET)
    count = 0
    with events_by_tag_at(setup.url, settings=settings, events_by_tag=tag_settings) as query:
        began = time.perf_counter()
        with query.current(TAG) as stream:
            for _ in stream:
                count += 1
        elapsed = time.perf_counter() - began
    _check(count, setup.events, "library current()")
    return count / elapsed


@dataclass(frozen=True, slots=True)
class Figure:
    key: str
    label: str
    run: Callable[[], float]


def throughput(
    setup: Setup, *, repeat: int = 1, segments: Sequence[int] = SEGMENT_COUNTS
) -> tuple[dict[str, float], dict[int, StreamRun]]:
    """Every figure once per round, `repeat` rounds; the best rate of each.

    The ordo stream and the naive source run with each of `segments` segments or partitions.
    """
    streams: dict[int, StreamRun] = {}

    def stream(segments: int) -> float:
        run = ordo_stream(setup, segments=segments)
        if segments not in streams or run.rate > streams[segments].rate:
            streams[segments] = run
        return run.rate

    figures = [
        *(Figure(f"ordo-{n}", f"ordo stream, {n} seg", partial(stream, n)) for n in segments),
        Figure("ordo-batch-2", "ordo batch, 2 seg", lambda: ordo_batch(setup, segments=2)),
        *(
            Figure(f"naive-{n}", f"naive, {n} part", partial(naive, setup, partitions=n))
            for n in segments
        ),
        Figure("naive-stream-2", "naive stream, 2 part", lambda: naive_stream(setup, partitions=2)),
        Figure("parquet", "parquet", lambda: parquet(setup)),
        Figure("current", "library current()", lambda: library_current(setup)),
    ]
    best: dict[str, float] = {}
    for attempt in range(1, repeat + 1):
        for figure in figures:
            rate = figure.run()
            best[figure.key] = max(rate, best.get(figure.key, 0.0))
            log(f"  {figure.label} run {attempt}/{repeat}: {rate:,.0f} events/s")
    return best, streams


def _wait_for(condition: Callable[[], bool], *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            msg = f"timed out after {timeout:.0f} s waiting for {what}"
            raise TimeoutError(msg)
        time.sleep(0.05)


def _stop(query: StreamingQuery) -> None:
    query.stop()
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))


def empty_trigger_ms(setup: Setup) -> tuple[float, float]:
    """Mean and max durationMs["triggerExecution"] of idle triggers (no new events)."""
    spark = setup.spark
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "0")
    try:
        query = (
            spark.readStream.format("ordo_events_by_tag")
            .options(**setup.options(segments="2", startingOffsets="latest"))
            .options(eventualConsistencyDelayMs="50")
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", setup.checkpoint())
            .trigger(processingTime="0 seconds")
            .start()
        )
        try:
            # Skip the first updates: the first trigger also starts the source.
            skip = 3

            def idle() -> list[int]:
                return [
                    p.durationMs["triggerExecution"]
                    for p in query.recentProgress[skip:]
                    if p.numInputRows == 0 and "triggerExecution" in p.durationMs
                ]

            _wait_for(
                lambda: len(idle()) >= EMPTY_PROGRESS, timeout=120, what="idle progress updates"
            )
            samples = idle()[:EMPTY_PROGRESS]
        finally:
            _stop(query)
    finally:
        spark.conf.unset("spark.sql.streaming.noDataProgressEventInterval")
    return sum(samples) / len(samples), max(samples)


@dataclass(frozen=True, slots=True)
class Latency:
    p50_ms: float
    p99_ms: float
    received: int
    appended: int
    batch_ms: dict[str, float]
    """Mean durationMs of the micro-batches that carried rows, by phase."""
    batches: int


QUIET_DAYS = 30


def quiet_month(spark: SparkSession, scratch: Path, *, has_warm_up: bool = True) -> Row:
    """spark.read of a minute journal's two events QUIET_DAYS apart, against a minute apart.

    Its one batch spans QUIET_DAYS of empty minute buckets: a read that queried each of them
    (as the executors did) took seconds to minutes for 2 rows. The same read of two events a
    minute apart is what the quiet period should add nothing to; with `has_warm_up`, an untimed
    read before both pays Spark's warm-up, which the first timed one paid otherwise (it took the
    longer).
    """
    if has_warm_up:
        _two_events_read_s(spark, scratch / "quiet-warm-up.db", apart_ns=60 * 10**9)
    adjacent_s = _two_events_read_s(spark, scratch / "adjacent.db", apart_ns=60 * 10**9)
    quiet_s = _two_events_read_s(spark, scratch / "quiet.db", apart_ns=QUIET_DAYS * 86_400 * 10**9)
    return Row(
        f"minute journal, 2 events {QUIET_DAYS} days apart: read seconds",
        f"{quiet_s:,.2f}",
        f"s spark.read count(), 1 seg (2 events a minute apart: {adjacent_s:,.2f} s)",
    )


def _two_events_read_s(spark: SparkSession, db: Path, *, apart_ns: int) -> float:
    """Seconds of spark.read...count() of a new minute journal's 2 events `apart_ns` apart."""
    url = f"sqlite:///{db}"
    clock = ManualClock(time.time_ns() - 10**9 - apart_ns)
    first = format_first_time_bucket(clock.now_ns() // 1_000_000 - 60_000)
    settings = EventsByTagSettings(bucket_size=BucketSize.MINUTE, first_time_bucket=first)
    with open_journal(url, settings=settings, clock=clock) as journal:
        journal.append("quiet", [NewEvent.of(payload(0), tags=(TAG,))])
        clock.advance(apart_ns)
        journal.append("quiet", [NewEvent.of(payload(1), tags=(TAG,))])
    options = {
        "journal": url,
        "tag": TAG,
        "bucketSize": BucketSize.MINUTE.value,
        "firstTimeBucket": first,
        "eventualConsistencyDelayMs": "0",
        "segments": "1",
    }
    began = time.perf_counter()
    found = spark.read.format("ordo_events_by_tag").options(**options).load().count()
    elapsed = time.perf_counter() - began
    _check(found, 2, f"2 events {apart_ns // 10**9} s apart, spark.read")
    return elapsed


def append_to_sink_latency(setup: Setup, *, events: int) -> Latency:
    spark = setup.spark
    url = f"sqlite:///{setup.scratch / 'live.db'}"
    write_settings = EventsByTagSettings(
        first_time_bucket=FIRST_TIME_BUCKET, flush_interval=timedelta(0)
    )
    received: dict[int, int] = {}
    lock = threading.Lock()

    def on_batch(frame: DataFrame, batch_id: int) -> None:
        rows = frame.select("payload").collect()
        now = time.time_ns()
        with lock:
            for row in rows:
                received[json.loads(row.payload)["i"]] = now

    pid = "live-0001"
    appended: dict[int, int] = {}
    with open_journal(url, settings=write_settings) as journal:
        journal.recover(pid)
        query = (
            spark.readStream.format("ordo_events_by_tag")
            .options(
                journal=url,
                tag=TAG,
                firstTimeBucket=FIRST_TIME_BUCKET,
                eventualConsistencyDelayMs="50",
                segments="1",
            )
            .load()
            .writeStream.foreachBatch(on_batch)
            .option("checkpointLocation", setup.checkpoint())
            .trigger(processingTime="100 milliseconds")
            .start()
        )
        try:
            journal.append(pid, [NewEvent.of({"i": -1}, tags=(TAG,))])
            _wait_for(lambda: -1 in received, timeout=120, what="the warm-up event")
            _wait_for(
                lambda: any(p.numInputRows for p in query.recentProgress),
                timeout=30,
                what="the warm-up batch's progress",
            )
            warm_up_batch = max(p.batchId for p in query.recentProgress if p.numInputRows)
            began = time.perf_counter()
            for i in range(events):
                pause = began + i * LATENCY_INTERVAL_S - time.perf_counter()
                if pause > 0:
                    time.sleep(pause)
                at = time.time_ns()
                journal.append(pid, [NewEvent.of({"i": i}, tags=(TAG,))])
                appended[i] = at
            try:
                _wait_for(
                    lambda: all(i in received for i in appended), timeout=30, what="every event"
                )
            except TimeoutError as exc:
                log(f"  latency: {exc}")
            progress = [
                p for p in query.recentProgress if p.numInputRows and p.batchId > warm_up_batch
            ]
        finally:
            _stop(query)
    batch_ms: dict[str, float] = {}
    for p in progress:
        for key, ms in p.durationMs.items():
            batch_ms[key] = batch_ms.get(key, 0.0) + ms / len(progress)
    with lock:
        latencies = sorted((received[i] - at) / 1e6 for i, at in appended.items() if i in received)
    if not latencies:
        return Latency(math.nan, math.nan, 0, len(appended), batch_ms, len(progress))
    return Latency(
        percentile(latencies, 0.50),
        percentile(latencies, 0.99),
        len(latencies),
        len(appended),
        batch_ms,
        len(progress),
    )


def profile(setup: Setup) -> list[Row]:
    """One 2-segment stream through TimedEventsByTagSource; where its time went."""
    timings = setup.scratch / "timings.jsonl"
    timings.unlink(missing_ok=True)
    plain = ordo_stream(setup, segments=2)
    run = ordo_stream(setup, segments=2, source=TimedEventsByTagSource.name())
    records = [json.loads(line) for line in timings.read_text().splitlines()]
    plans = [r["s"] for r in records if r["what"] == "latestOffset"]
    reads = [r for r in records if r["what"] == "read" and r["rows"]]
    wall = setup.events / run.rate
    d = run.durations_ms
    rows = [
        Row(
            "profile: ordo stream, 2 seg (plain, just before)",
            f"{plain.rate:,.0f}",
            f"events/s ({setup.events / plain.rate:.1f} s wall)",
        ),
        Row(
            "profile: ordo stream, 2 seg (instrumented)",
            f"{run.rate:,.0f}",
            f"events/s ({wall:.1f} s wall, {run.batches} batch(es))",
        ),
        Row(
            "profile: Spark durationMs latestOffset / addBatch / trigger",
            f"{d.get('latestOffset', 0) / 1000:.1f} / {d.get('addBatch', 0) / 1000:.1f}"
            f" / {d.get('triggerExecution', 0) / 1000:.1f}",
            "s (summed over the query's progress updates)",
        ),
        Row(
            "profile: planner latestOffset() calls",
            f"{sum(plans):.2f}",
            f"s in {len(plans)} calls (driver side, Python)",
        ),
    ]
    for r in sorted(reads, key=lambda r: -r["rows"]):
        rest = r["inside"] - r["sql"] - r["arrow"]
        rows.append(
            Row(
                f"profile: read_partition, {r['rows']:,} rows",
                f"{r['wall']:.1f}",
                f"s wall: SQL (packed pages) {r['sql']:.1f}, Arrow {r['arrow']:.1f}, "
                f"filter+sort {rest:.1f}, Spark around it {r['wall'] - r['inside']:.1f}",
            )
        )
    return rows


# --- the table -----------------------------------------------------------------------------


def build_rows(
    best: dict[str, float],
    streams: dict[int, StreamRun],
    *,
    populate_s: float,
    events: int,
    unit: str,
) -> list[Row]:
    segments = sorted(streams)  # the segment counts the streams ran with
    rows = [
        Row(
            f"populate (Journal.append, {APPEND_BATCH}/append)",
            f"{populate_s:,.1f}",
            f"s ({events / populate_s:,.0f} events/s; {events:,} events)",
        )
    ]
    for n in segments:
        rows.append(
            Row(f"ordo stream, {n} segment(s), availableNow", f"{best[f'ordo-{n}']:,.0f}", unit)
        )
    rows.append(Row("ordo batch (spark.read), 2 segments", f"{best['ordo-batch-2']:,.0f}", unit))
    for n in segments:
        rows.append(
            Row(
                f"naive Python source, {n} partition(s), tuples", f"{best[f'naive-{n}']:,.0f}", unit
            )
        )
    rows.append(
        Row("naive Python source as a stream, 2 partitions", f"{best['naive-stream-2']:,.0f}", unit)
    )
    rows.append(Row("Spark parquet (same rows, JVM only)", f"{best['parquet']:,.0f}", unit))
    rows.append(Row("library current(), no Spark", f"{best['current']:,.0f}", unit))
    for n in segments:
        d = streams[n].durations_ms
        rows.append(
            Row(
                f"ordo stream, {n} seg: latestOffset / addBatch",
                f"{d.get('latestOffset', 0):,} / {d.get('addBatch', 0):,}",
                f"ms (Spark durationMs, best run, {streams[n].batches} batch(es))",
            )
        )
    ordo2 = best["ordo-2"]
    rows.append(
        ratio_row(
            "ordo stream 2 seg / naive stream 2 part",
            ordo2 / best["naive-stream-2"],
            target=NAIVE_TARGET,
        )
    )
    rows.append(
        ratio_row(
            "ordo batch 2 seg / naive batch 2 part",
            best["ordo-batch-2"] / best["naive-2"],
            target=NAIVE_TARGET,
        )
    )
    rows.append(
        Row(
            "ordo stream 2 seg / naive batch 2 part",
            f"{ordo2 / best['naive-2']:.2f}",
            "x (informative: a stream pays ~0.5 s to start its source process)",
        )
    )
    rows.append(
        ratio_row("ordo stream 2 seg / ordo 1 seg", ordo2 / best["ordo-1"], target=SCALING_TARGET)
    )
    rows.append(
        Row("ordo stream 2 seg / parquet", f"{ordo2 / best['parquet']:.2f}", "x (informative)")
    )
    rows.append(
        Row(
            "ordo stream 2 seg / library current()",
            f"{ordo2 / best['current']:.2f}",
            "x (informative)",
        )
    )
    return rows


def warm_up(spark: SparkSession, scratch: Path, *, events: int) -> None:
    """Every throughput figure once, untimed, on a journal of `events` events of its own.

    Spark's first jobs (JVM code paths, Python workers) would otherwise count in the first
    figures; a --quick run skips this (its figures are not the point).
    """
    db, parquet = scratch / "warm-up.db", scratch / "warm-up-parquet"
    populate(f"sqlite:///{db}", events=events)
    write_parquet(db, parquet, events=events)
    log(f"warm-up: every figure once on {events:,} events (untimed) ...")
    throughput(Setup(spark, f"sqlite:///{db}", db, parquet, scratch, events))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--events", type=positive_count, default=None, help="events per read figure"
    )
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument(
        "--repeat", type=positive_count, default=1, help="rounds; each figure keeps its best"
    )
    parser.add_argument(
        "--latency-events",
        type=positive_count,
        default=None,
        help="events appended in the latency run",
    )
    parser.add_argument(
        "--profile", action="store_true", help="add an instrumented 2-segment stream"
    )
    args = parser.parse_args(argv)
    events = args.events or (QUICK_EVENTS if args.quick else DEFAULT_EVENTS)
    latency_events = args.latency_events or (
        QUICK_LATENCY_EVENTS if args.quick else DEFAULT_LATENCY_EVENTS
    )
    started = time.perf_counter()
    print("\n".join(machine_lines(libraries=("ordo", "pyspark", "pyarrow"))))
    print(
        f"workload:   {events:,} events, one tag ({TAG!r}), {PERSISTENCE_IDS} persistence ids,"
        f" {APPEND_BATCH} events per append, {len(payload_bytes(0))}-byte JSON payload; SQLite"
    )
    print(
        "spark:      local[2], noop sink; streams trigger(availableNow=True), fresh checkpoint"
        " per run; events/s = N / (start() .. awaitTermination()); warm page cache"
    )
    print(flush=True)
    with tempfile.TemporaryDirectory(prefix="ordo-bench-spark-") as root:
        scratch = Path(root)
        db = scratch / "journal.db"
        url = f"sqlite:///{db}"
        log(f"populating {events:,} events ...")
        populate_s = populate(url, events=events)
        _check(count_rows(db), events, "tag_views after populating")
        log("writing parquet (untimed) ...")
        write_parquet(db, scratch / "parquet", events=events)
        warm(db)
        log("starting spark ...")
        spark = start_session(master="local[2]", app_name="ordo-bench")
        try:
            spark.dataSource.register(NaiveTagSource)
            spark.dataSource.register(TimedEventsByTagSource)
            if not args.quick:
                warm_up(spark, scratch, events=min(WARM_UP_EVENTS, events))
            setup = Setup(spark, url, db, scratch / "parquet", scratch, events)
            segments = QUICK_SEGMENT_COUNTS if args.quick else SEGMENT_COUNTS
            best, streams = throughput(setup, repeat=args.repeat, segments=segments)
            unit = "events/s" if args.repeat == 1 else f"events/s, best of {args.repeat}"
            rows = build_rows(best, streams, populate_s=populate_s, events=events, unit=unit)
            log("empty micro-batches ...")
            mean_ms, max_ms = empty_trigger_ms(setup)
            rows.append(
                Row(
                    "empty micro-batch (triggerExecution, 2 seg)",
                    f"{mean_ms:,.1f}",
                    f"ms mean of {EMPTY_PROGRESS} idle triggers (max {max_ms:,} ms)",
                )
            )
            log("quiet month: a minute journal's 2 events 30 days apart ...")
            rows.append(quiet_month(spark, scratch, has_warm_up=not args.quick))
            log(f"append-to-sink latency, {latency_events} events ...")
            latency = append_to_sink_latency(setup, events=latency_events)
            lost = latency.appended - latency.received
            rows.append(
                Row(
                    "append-to-sink latency (100 ms trigger, delay 50 ms)",
                    f"{latency.p50_ms:,.1f} / {latency.p99_ms:,.1f}",
                    f"ms p50 / p99 ({latency.received} events"
                    + (f", {lost} NOT RECEIVED)" if lost else ")"),
                )
            )
            b = latency.batch_ms
            rows.append(
                Row(
                    "  its micro-batches: trigger / latestOffset / addBatch",
                    f"{b.get('triggerExecution', 0):,.0f} / {b.get('latestOffset', 0):,.0f}"
                    f" / {b.get('addBatch', 0):,.0f}",
                    f"ms mean of {latency.batches} batches with rows (Spark durationMs)",
                )
            )
            if args.profile:
                log("profile: instrumented 2-segment stream ...")
                rows.extend(profile(setup))
        finally:
            spark.stop()
    print_table(rows)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
