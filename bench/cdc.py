"""CDC throughput through the Spark materializer, and the cost of CDC against bulk mode.

    .venv/bin/python bench/cdc.py [--writes N] [--keys N] [--rows N] [--quick] [--repeat N]

1. Materializer (target >= 50,000 mutations/s on local[2] with 3 replicas). `ReplicaWorkload`
   (ordo.simulation.cdc) makes N client writes (default 100,000) over K partition keys (20,000)
   as 3 replicas deliver them: each write 2-3 times, reordered, partial, with skewed clocks. The
   deliveries are published (untimed) into a Parquet change log with 8 partitions; then
   `ordo.spark.materialize(..., available_now=True)` with an SQLite sink runs once on a fresh
   checkpoint: deliveries / wall time from start() to awaitTermination() is the figure. The
   JVM and the Python workers are warmed first by a run on a small workload (not with --quick,
   a smoke run whose figures then include Spark's first jobs). Baselines in the
   same run: the pure fold (`ordo.cdc.fold`) of the same deliveries in this one process, and
   the same query with a stateful step that does nothing (what Spark, the shuffle into state
   buckets and transformWithStateInPandas cost before any folding: the ceiling of this design),
   and the stateful step's own Python (ChangeFoldProcessor over the same rows in this process,
   state in memory: what ordo costs before Spark's hand-over and state store calls).
   Also: the sink alone (the stored messages applied again as one batch to a fresh database),
   and Spark listing the log's files as a micro-batch names them, on the driver as
   `start_session` sets it and with Spark's default threshold (a listing job above 32 paths).
2. CDC vs bulk mode (target: CDC >= 20x cheaper) when 1% of an R-row SQLite table (default
   1,000,000) changes. Bulk mode, as seed 003 describes it and rejects it: scan the whole table
   (into Arrow) and diff it with the previous scan (a pyarrow join on the key) to find the
   changed rows. CDC: the change triggers record the 1% updates; the capture reads them from the
   change table and publishes them to the change log. Both sides are timed from "the updates
   are committed" to "the changed rows are found and published". The trigger overhead on the
   writes (the same updates on a copy of the table without triggers) is reported too, and so
   is the materializer's latency over those changes: a streaming query (100 ms trigger) whose
   state was loaded with the table's snapshot beforehand and which has applied one change already
   (so the state is loaded: untimed), timed from the end of the publish until its messages are in
   the sink, so the end-to-end figure is visible as well. Three rounds, each changing another
   1% and diffing with the previous round's scan (as bulk mode would); each figure keeps its best
   (one round with --quick).
   Updates, capture and bulk scan each start when the running query has no trigger active (the
   tail of its previous batch would otherwise run alongside).
3. The change triggers' cost per insert of a JSON document, small and about 11 kB (2,000
   inserts into a new table with and without the triggers, best of 3; 200 inserts once with
   --quick): a JSON column's trigger looks for numbers beyond a double's range in long text
   (`json_tree()`).

A benchmark reports; it exits 0 whether the targets are met or not.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import shutil
import sqlite3
import sys
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import pandas as pd  # type: ignore[import-untyped]
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.streaming.stateful_processor import (
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from _args import positive_count
from _report import Row, ratio_row
from _spark import report_on_spark
from ordo.cdc import PartitionState, Publisher, SchemaRegistry, fold
from ordo.cdc.capture import Capture
from ordo.cdc.message_rows import MessageRows
from ordo.cdc.mutation import Key, Mutation
from ordo.settings import CaptureSettings
from ordo.simulation.cdc import SIMULATED_SCHEMA, ReplicaWorkload
from ordo.spark import MaterializerSpec
from ordo.spark.cdc_simulation import SimulationRun, publish_deliveries, sink_url
from ordo.spark.change_processor import ChangeFoldProcessor
from ordo.spark.change_schemas import CHANGE_LOG_DDL
from ordo.spark.materializer import bucketed, materialize, materialize_available
from ordo.spark.register import LISTING_ON_DRIVER
from ordo.storage.open import stores_at
from ordo.storage.parquet import ParquetChangeLog
from ordo.storage.sqlite.change_source import SQLiteChangeSource
from ordo.storage.stores import Stores

PARTITIONS = 8
RUN = SimulationRun(SIMULATED_SCHEMA.table)
"""The runs' names: the simulated table's own (each run has a new sink of its own)."""
MATERIALIZER_TARGET = 50_000.0
SPARK_LISTING_THRESHOLD = 32
"""Spark's default spark.sql.sources.parallelPartitionDiscovery.threshold."""
BULK_TARGET = 20.0
CHANGED_SHARE = 0.01
ROUNDS = 3
"""Rounds of the CDC vs bulk comparison (each changes another 1%) and of the JSON-document
trigger figure; each figure keeps its best. --quick runs one: a smoke run checks that the figures
are made, not how steady they are."""
DEFAULT_SIZES = {"writes": 100_000, "keys": 20_000, "rows": 1_000_000}
QUICK_SIZES = {"writes": 10_000, "keys": 2_000, "rows": 50_000}
"""--quick's sizes; --writes, --keys and --rows win over either (they were ignored with --quick)."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_materializer(spark: SparkSession, root: Path, table: str, name: str) -> float:
    """One available-now run of the materializer over `root`'s change log; its wall seconds."""
    spec = MaterializerSpec(
        name=name, table=table, change_log=str(root / "log"), sink=sink_url(root)
    )
    return materialize_available(spark, spec, checkpoint=str(root / f"checkpoint-{name}"))


def local_fold_rate(deliveries: Sequence[Mutation]) -> float:
    """Mutations/s of the pure fold in this process (the baseline)."""
    states: dict[Key, PartitionState] = defaultdict(PartitionState)
    started = time.perf_counter()
    for mutation in deliveries:
        states[mutation.partition_key], _ = fold(
            states[mutation.partition_key], mutation, SIMULATED_SCHEMA
        )
    return len(deliveries) / (time.perf_counter() - started)


class PassThrough(StatefulProcessor):
    """A stateful step that does nothing: counts its rows, keeps no state, emits one row."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        pass

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        yield pd.DataFrame({"bucket": [key[0]], "rows": [sum(len(frame) for frame in rows)]})

    def close(self) -> None:
        pass


def run_pass_through(spark: SparkSession, root: Path, table: str, name: str) -> float:
    """The materializer's query shape with a stateful step that does nothing; its wall seconds.

    Same change log, same grouping into STATE_BUCKETS, RocksDB state store, a sink that
    collects each batch as Arrow: what Spark and transformWithStateInPandas cost alone.
    """
    counts = (
        bucketed(spark.readStream.schema(CHANGE_LOG_DDL).parquet(str(root / "log" / table)))
        .groupBy("state_bucket")
        .transformWithStateInPandas(PassThrough(), "bucket LONG, rows LONG", "Append", "None")
    )
    started = time.perf_counter()
    query = (
        counts.writeStream.foreachBatch(lambda batch, _: batch.toArrow())
        .option("checkpointLocation", str(root / f"checkpoint-pass-through-{name}"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return time.perf_counter() - started


class _BucketStates:
    """The state handle of every bucket in memory, for running the stateful step without Spark.

    `bucket` selects whose states the step sees, as Spark scopes state to the grouping key.
    """

    def __init__(self) -> None:
        self.bucket = 0
        self._maps: dict[tuple[int, str], dict[Any, Any]] = defaultdict(dict)
        self._values: dict[tuple[int, str], Any] = {}

    def getMapState(self, name: str, *_: object) -> Any:
        states = self

        class _Map:
            def getValue(self, key: Any) -> Any:
                return states._maps[(states.bucket, name)].get(key)

            def updateValue(self, key: Any, value: Any) -> None:
                states._maps[(states.bucket, name)][key] = value

            def iterator(self) -> Iterator[tuple[Any, Any]]:
                return iter(list(states._maps[(states.bucket, name)].items()))

            def clear(self) -> None:
                states._maps[(states.bucket, name)].clear()

        return _Map()

    def getValueState(self, name: str, *_: object) -> Any:
        states = self

        class _Value:
            def get(self) -> Any:
                return states._values.get((states.bucket, name))

            def update(self, value: Any) -> None:
                states._values[(states.bucket, name)] = value

        return _Value()


def stateful_step_seconds(spark: SparkSession, root: Path, table: str) -> float:
    """CPU seconds of the materializer's stateful step alone: ChangeFoldProcessor on the
    change log's rows, bucket by bucket, in this process, with its state in memory.

    What ordo's Python costs before Spark's hand-over and state store calls (the frames are
    built beforehand, untimed).
    """
    frame = bucketed(spark.read.schema(CHANGE_LOG_DDL).parquet(str(root / "log" / table)))
    groups = list(frame.toPandas().groupby("state_bucket"))  # type: ignore[attr-defined]
    processor = ChangeFoldProcessor(sink=sink_url(root), table=table)
    states = _BucketStates()
    processor.init(states)  # type: ignore[arg-type]  # a handle in all but name
    started = time.process_time()
    for bucket, rows in groups:
        states.bucket = int(bucket)
        for _ in processor.handleInputRows((bucket,), iter([rows]), None):  # type: ignore[arg-type]
            pass
    return time.process_time() - started


def sink_seconds(root: Path, materializer: str) -> tuple[int, float]:
    """How long the sink takes to store one batch of the messages `materializer` stored.

    The messages are read back and applied again, as one batch, to a fresh sink database:
    `SqlChangeSink.apply_batch` alone (one transaction), without Spark around it.
    """
    with stores_at(sink_url(root)) as stores:
        messages = MessageRows.from_messages(list(stores.change_sink.read_messages(materializer)))
    fresh = root / "sink-again"
    fresh.mkdir()
    with stores_at(sink_url(fresh)) as stores:
        registry = SchemaRegistry(stores.schemas)
        registry.register(SIMULATED_SCHEMA)
        history = registry.history(SIMULATED_SCHEMA.table)
        started = time.perf_counter()
        stores.change_sink.apply_batch(
            materializer="again",
            query_id="bench",
            batch_id=0,
            target_table="again",
            messages=messages,
            history=history,
        )
        return len(messages), time.perf_counter() - started


def listing_seconds(spark: SparkSession, log_dir: Path, threshold: int) -> tuple[int, float]:
    """How long Spark takes to list the change log's files, named one by one as a micro-batch
    of the file stream source names them, with `threshold` as the parallel-listing threshold."""
    key = "spark.sql.sources.parallelPartitionDiscovery.threshold"
    paths = [str(path) for path in sorted(log_dir.glob("partition=*/*.parquet"))]
    configured = spark.conf.get(key)
    spark.conf.set(key, str(threshold))
    try:
        started = time.perf_counter()
        spark.read.schema(CHANGE_LOG_DDL).option("basePath", str(log_dir)).parquet(*paths)
        return len(paths), time.perf_counter() - started
    finally:
        if configured is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, configured)


def warm_up(spark: SparkSession, work: Path) -> None:
    """The materializer and the pass-through query once on a small workload, untimed.

    Spark's first jobs (JVM code paths, Python workers) would otherwise count in the first
    timed run; a --quick run skips this (its figures are not the point).
    """
    log("materializer: warm-up")
    warm = work / "warm"
    warm.mkdir()
    publish_deliveries(ReplicaWorkload(mutations=2_000, keys=200, seed=2), run=RUN, work_dir=warm)
    run_materializer(spark, warm, SIMULATED_SCHEMA.table, "warm")
    run_pass_through(spark, warm, SIMULATED_SCHEMA.table, "warm")


def bench_materializer(
    spark: SparkSession, writes: int, keys: int, work: Path, *, repeat: int
) -> list[Row]:
    log(f"materializer: {writes:,} writes over {keys:,} keys, 3 replicas")
    timed = work / "timed"
    timed.mkdir()
    deliveries = publish_deliveries(
        ReplicaWorkload(mutations=writes, keys=keys, seed=1), run=RUN, work_dir=timed
    )
    elapsed = min(
        run_materializer(spark, timed, SIMULATED_SCHEMA.table, f"timed-{n}") for n in range(repeat)
    )
    rate = len(deliveries) / elapsed
    ceiling_s = min(
        run_pass_through(spark, timed, SIMULATED_SCHEMA.table, str(n)) for n in range(repeat)
    )
    baseline = local_fold_rate(deliveries)
    step_s = min(stateful_step_seconds(spark, timed, SIMULATED_SCHEMA.table) for _ in range(repeat))
    stored, sink_s = sink_seconds(timed, "timed-0")
    log_dir = timed / "log" / SIMULATED_SCHEMA.table
    files, spark_listing_s = listing_seconds(spark, log_dir, SPARK_LISTING_THRESHOLD)
    _, driver_listing_s = listing_seconds(spark, log_dir, LISTING_ON_DRIVER)
    return [
        Row("replica deliveries", f"{len(deliveries):,}", f"from {writes:,} writes"),
        Row(
            "materializer local[2]",
            f"{rate:,.0f}",
            f"mutations/s ({elapsed:.1f} s, best of {repeat})",
        ),
        Row(
            "same query, stateful step does nothing",
            f"{len(deliveries) / ceiling_s:,.0f}",
            f"mutations/s ({ceiling_s:.1f} s; Spark + transformWithStateInPandas alone)",
        ),
        Row("pure fold, 1 process", f"{baseline:,.0f}", "mutations/s (baseline)"),
        Row(
            "stateful step's Python, 1 process",
            f"{step_s:.2f}",
            "CPU s (ChangeFoldProcessor, state in memory, no Spark)",
        ),
        ratio_row("materializer vs 50k/s", rate / MATERIALIZER_TARGET, target=1.0),
        Row(
            "sink: store one batch", f"{sink_s:.2f}", f"s for {stored:,} messages (one transaction)"
        ),
        Row(
            "listing the change log's files",
            f"{driver_listing_s:.2f} / {spark_listing_s:.2f}",
            f"s for {files:,} files: on the driver (ordo) / Spark's default (a job above 32)",
        ),
    ]


# --- CDC vs bulk mode -----------------------------------------------------------------------

ITEMS = "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL, qty INTEGER)"


def make_items(path: Path, rows: int) -> None:
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(ITEMS)
        conn.executemany(
            "INSERT INTO items VALUES (?, ?, ?, ?)",
            ((i, f"item-{i}", i * 0.01, i % 100) for i in range(rows)),
        )


def scan(path: Path) -> pa.Table:
    """Bulk mode's scan: the whole table into Arrow."""
    with closing(sqlite3.connect(path)) as conn:
        cursor = conn.execute("SELECT id, name, price, qty FROM items")
        columns = list(zip(*cursor.fetchall(), strict=True))
    return pa.table(
        {n: list(c) for n, c in zip(("id", "name", "price", "qty"), columns, strict=True)}
    )


def diff(previous: pa.Table, current: pa.Table) -> int:
    """Bulk mode's diff: rows whose values changed (or appeared or vanished), by key."""
    joined = previous.join(current, "id", join_type="full outer", right_suffix="_now")
    masks = [
        pc.fill_null(pc.not_equal(joined[column], joined[f"{column}_now"]), True)
        for column in ("name", "price", "qty")
    ]
    return int(pc.sum(functools.reduce(pc.or_, masks)).as_py() or 0)


def update_items(path: Path, ids: Sequence[int]) -> float:
    """The 1% updates, one statement per row in one transaction; their wall seconds."""
    with closing(sqlite3.connect(path)) as conn:
        started = time.perf_counter()
        with conn:
            conn.executemany(
                "UPDATE items SET price = price + 1, qty = qty + 1 WHERE id = ?",
                ((i,) for i in ids),
            )
        return time.perf_counter() - started


DOCUMENTS = 2_000
"""Writes of the JSON-document trigger figure, each a new row."""
QUICK_DOCUMENTS = 200
"""--quick's: the same statements, a tenth of the rows."""


def document_writes(path: Path, document: str, *, captured: bool, writes: int) -> float:
    """Wall seconds of `writes` inserts of `document` into a fresh JSON column, one
    transaction; with `captured`, the table's change triggers are installed first."""
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("CREATE TABLE docs (id INTEGER PRIMARY KEY, body JSON)")
    if captured:
        with closing(SQLiteChangeSource(path, ["docs"])) as source:
            source.install()
    with closing(sqlite3.connect(path)) as conn:
        started = time.perf_counter()
        with conn:
            conn.executemany(
                "INSERT INTO docs VALUES (?, ?)", ((i, document) for i in range(writes))
            )
        return time.perf_counter() - started


def bench_document_triggers(work: Path, *, rounds: int, writes: int) -> list[Row]:
    """The triggers' cost per write of a small and of a 10 kB JSON document, best of `rounds`
    of `writes` inserts each.

    A JSON column's trigger checks the value for numbers beyond a double's range (json_tree()),
    only for text of 210 characters or more or with a three-digit exponent: the small document
    is below that, the large one walks it.
    """
    root = work / "documents"
    root.mkdir()
    small = json.dumps({"sku": "A-1", "qty": 3, "price": 9.99})
    large = json.dumps(
        {"lines": [{"sku": f"A-{i}", "qty": i, "price": i * 0.5} for i in range(250)]}
    )
    rows = []
    for name, document in (("small", small), ("large", large)):
        cost = []
        for round_nr in range(rounds):
            plain, captured = (root / f"{name}-{round_nr}-{kind}.db" for kind in ("plain", "cdc"))
            with_s = document_writes(captured, document, captured=True, writes=writes)
            cost.append(with_s - document_writes(plain, document, captured=False, writes=writes))
        rows.append(
            Row(
                f"trigger cost, {len(document):,}-character JSON",
                f"{max(min(cost), 0.0) / writes * 1e6:.1f}",
                f"µs per insert (with vs without triggers, {writes:,} inserts, best of {rounds})",
            )
        )
    return rows


def start_running(spark: SparkSession, root: Path) -> StreamingQuery:
    """The materializer as a pipeline runs it: a streaming query with its state loaded."""
    spec = MaterializerSpec(
        name="items",
        table="items",
        change_log=str(root / "log"),
        sink=sink_url(root),
    )
    query = materialize(
        spark, spec, checkpoint=str(root / "checkpoint-items"), processing_time="100 milliseconds"
    )
    deadline = time.monotonic() + 300
    while query.lastProgress is None and time.monotonic() < deadline:  # state loaded, idle
        time.sleep(0.1)
    time.sleep(1.0)
    return query


def wait_until_idle(query: StreamingQuery) -> None:
    """Until the query has no trigger running (its last batch's commit and state work done)."""
    deadline = time.monotonic() + 60
    quiet = 0
    while quiet < 3 and time.monotonic() < deadline:  # three checks 50 ms apart
        quiet = 0 if query.status["isTriggerActive"] else quiet + 1
        time.sleep(0.05)


def wait_for_messages(stores: Stores, expected: int, *, since: float) -> float:
    """Seconds from `since` until the sink holds `expected` messages of the "items" materializer."""
    deadline = since + 600
    while time.perf_counter() < deadline:
        progress = [p for p in stores.change_sink.progress() if p.materializer == "items"]
        if progress and progress[0].messages >= expected:
            return time.perf_counter() - since
        time.sleep(0.02)
    msg = f"the materializer did not store {expected} messages within 600 s"
    raise RuntimeError(msg)


def bench_bulk(spark: SparkSession, rows: int, work: Path, *, rounds: int) -> list[Row]:
    root = work / "bulk"
    root.mkdir()
    source, plain = root / "shop.db", root / "plain.db"
    log(f"bulk vs CDC: {rows:,} rows, {CHANGED_SHARE:.0%} change")
    make_items(source, rows)
    shutil.copy(source, plain)
    log_root = ParquetChangeLog(root / "log")
    publisher = Publisher(log_root, partitions=PARTITIONS)
    with (
        stores_at(sink_url(root)) as stores,
        closing(SQLiteChangeSource(source, ["items"])) as cdc_source,
    ):
        cdc_source.install()
        capture = Capture(
            cdc_source,
            publisher,
            SchemaRegistry(stores.schemas),
            settings=CaptureSettings(max_changes=100_000),
        )
        capture.publish_snapshot("items")
        log("bulk vs CDC: loading the materializer's state with the snapshot")
        run_materializer(spark, root, "items", "items")
        running = start_running(spark, root)
        warm = rows - 1  # a first change makes the running query load the state it holds
        update_items(source, [warm])
        capture.run(until_idle=True)
        wait_for_messages(stores, rows + 1, since=time.perf_counter())
        previous = scan(source)  # bulk mode's last scan
        best: dict[str, float] = {}
        expected = rows + 1
        for round_nr in range(rounds):
            changed = random.Random(round_nr).sample(range(rows - 1), int(rows * CHANGED_SHARE))
            wait_until_idle(running)  # each side is timed with the materializer idle
            plain_s = update_items(plain, changed)
            triggered_s = update_items(source, changed)
            started = time.perf_counter()
            totals = capture.run(until_idle=True)
            cdc_s = time.perf_counter() - started
            expected += len(changed)
            materialize_s = wait_for_messages(stores, expected, since=time.perf_counter())
            wait_until_idle(running)
            started = time.perf_counter()
            current = scan(source)
            found = diff(previous, current)
            bulk_s = time.perf_counter() - started
            previous = current
            if found != len(changed) or totals.published.get("items") != len(changed):
                msg = f"bulk found {found}, CDC published {totals.published}"
                raise RuntimeError(msg)
            log(f"  round {round_nr + 1}: bulk {bulk_s:.3f} s, CDC {cdc_s:.3f} s")
            for name, value in (
                ("bulk", bulk_s),
                ("cdc", cdc_s),
                ("materialize", materialize_s),
                ("plain", plain_s),
                ("triggered", triggered_s),
            ):
                best[name] = min(value, best.get(name, value))
        running.stop()
    bulk_s, cdc_s, materialize_s = best["bulk"], best["cdc"], best["materialize"]
    trigger_s = max(best["triggered"] - best["plain"], 0.0)
    return [
        Row("rows / changed", f"{rows:,} / {len(changed):,}", f"rows, best of {rounds} round(s)"),
        Row("bulk: scan + diff", f"{bulk_s:.3f}", f"s (reads {rows:,} rows)"),
        Row("CDC: capture + publish", f"{cdc_s:.3f}", f"s (reads {len(changed):,} changes)"),
        Row(
            "CDC: materializer latency",
            f"{materialize_s:.3f}",
            "s (publish -> messages stored; running query, 100 ms trigger)",
        ),
        Row(
            "CDC: trigger cost on writes",
            f"{trigger_s:.3f}",
            f"s (updates: {best['triggered']:.3f} with vs {best['plain']:.3f} s without triggers)",
        ),
        ratio_row("bulk / CDC (capture)", bulk_s / cdc_s, target=BULK_TARGET),
        Row(
            "bulk / CDC (capture + trigger cost)",
            f"{bulk_s / (cdc_s + trigger_s):.2f}",
            "x (the triggers' share of the writes counted as CDC's; no target)",
        ),
        Row(
            "bulk / CDC (capture + materializer)",
            f"{bulk_s / (cdc_s + materialize_s):.2f}",
            "x (end to end; no target)",
        ),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--writes", type=positive_count, default=None, help="client writes")
    parser.add_argument("--keys", type=positive_count, default=None, help="partition keys")
    parser.add_argument("--rows", type=positive_count, default=None, help="rows of the bulk table")
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument(
        "--repeat", type=positive_count, default=1, help="materializer runs; the best is reported"
    )
    args = parser.parse_args(argv)
    sizes = QUICK_SIZES if args.quick else DEFAULT_SIZES
    writes, keys, rows = (getattr(args, name) or sizes[name] for name in ("writes", "keys", "rows"))

    def measure(spark: SparkSession, work: Path) -> list[Row]:
        if not args.quick:
            warm_up(spark, work)
        rounds = 1 if args.quick else ROUNDS
        return [
            *bench_materializer(spark, writes, keys, work, repeat=args.repeat),
            *bench_bulk(spark, rows, work, rounds=rounds),
            *bench_document_triggers(
                work, rounds=rounds, writes=QUICK_DOCUMENTS if args.quick else DOCUMENTS
            ),
        ]

    report_on_spark("cdc", measure)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
