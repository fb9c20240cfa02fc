"""The main job: writers append a shop's events while a Spark projection builds a read model.

Writer processes append to the journal; a streaming projection of the tag `order`, in four
segments, counts each order's events in `order_totals` (exactly once, in order per order); one
segment is split while it runs. The result is checked against the journal: every event counted
once (lost / duplicated), in order (misordered), and the tag views complete. On the embedded
default the read model's changes are also captured and materialized (`cdc_demo`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from ordo.errors import QueryFailedError
from ordo.hashing import stable_hash
from ordo.processing import HandlerContext, split_segment
from ordo.query import EventEnvelope
from ordo.settings import EventsByTagSettings
from ordo.simulation.workload import Workload
from ordo.simulation.writers import WriteReport, WriterPlan, WritersStopped, run_writers
from ordo.spark.cdc_demo import CdcDemoReport, run_cdc_part, start_capture
from ordo.spark.projection import ProjectionSpec, projection
from ordo.storage.location import SQLiteLocation, parse_location
from ordo.storage.open import stores_at
from ordo.storage.stores import Stores
from ordo.time import format_first_time_bucket
from ordo.tools.verification import check_tag_views_of
from ordo.types import Tag

TAG = "order"
PROCESSOR = "order-totals"
SEGMENTS = 4
ORDER_TOTALS_TABLE = (
    "CREATE TABLE IF NOT EXISTS order_totals (pid TEXT PRIMARY KEY, "
    "events BIGINT NOT NULL, last_nr BIGINT NOT NULL, misordered BIGINT NOT NULL)"
)
"""The read model `count_order_events` writes into (one row per order)."""
BUCKET_SIZE = EventsByTagSettings().bucket_size
"""The bucket size the demo's writers and source use: the settings' default, which no option or
variable of the demo changes (ORDO_BUCKET_SIZE neither), so `ordo demo` refuses a journal that
records another before Spark starts."""


def count_order_events(event: EventEnvelope, context: HandlerContext) -> None:
    """The projection's handler: count an order's events; note any out of order."""
    p, conn = context.placeholder, context.connection
    row = conn.execute(
        f"SELECT events, last_nr, misordered FROM order_totals WHERE pid = {p}",
        (event.persistence_id,),
    ).fetchone()
    events, last_nr, misordered = row if row else (0, 0, 0)
    misordered += event.tag_pid_sequence_nr != last_nr + 1
    conn.execute(
        f"INSERT INTO order_totals (pid, events, last_nr, misordered) VALUES ({p}, {p}, {p}, {p}) "
        "ON CONFLICT (pid) DO UPDATE SET events = excluded.events, last_nr = excluded.last_nr, "
        "misordered = excluded.misordered",
        (event.persistence_id, events + 1, event.tag_pid_sequence_nr, misordered),
    )


@dataclass(slots=True)
class Progress:
    """What the live display shows; updated by the run, read by the display."""

    written: int = 0
    tagged: int = 0
    projected: int = 0
    segments: dict[str, int] = field(default_factory=dict)
    """segment -> events written but not projected yet (lag)."""
    batch_ms: int = 0
    batches: int = 0
    split: str = ""
    writing_since: float | None = None
    """time.monotonic() when the writers started (None while Spark warms up)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoReport:
    """The verdict of a run."""

    events: int
    tagged: int
    segments: int
    lost: int
    duplicated: int
    misordered: int
    tag_views_clean: bool
    seconds: float
    cdc: CdcDemoReport | None
    """The CDC part (None on PostgreSQL, where it needs a server with wal_level=logical)."""

    def to_json_dict(self) -> dict[str, Any]:
        """The last line of `ordo demo --json`."""
        return {
            "events": self.events,
            "projected_tag": TAG,
            "projected_events": self.tagged,
            "segments": self.segments,
            "lost": self.lost,
            "duplicated": self.duplicated,
            "misordered": self.misordered,
            "tag_views_clean": self.tag_views_clean,
            "events_per_s": round(self.events / self.seconds) if self.seconds else 0,
            **(self.cdc.to_json_dict() if self.cdc is not None else {}),
            "clean": self.is_clean,
        }

    @property
    def is_clean(self) -> bool:
        """Nothing lost, duplicated or misordered, and complete tag views."""
        is_cdc_clean = self.cdc is None or self.cdc.violations == 0
        return (
            not (self.lost or self.duplicated or self.misordered)
            and self.tag_views_clean
            and is_cdc_clean
        )


def run_demo(
    spark: SparkSession,
    *,
    journal: str,
    workload: Workload,
    work_dir: Path,
    on_progress: Callable[[Progress], None],
) -> DemoReport:
    """Write, project, split a segment half-way, wait for the projection, and check."""
    settings = EventsByTagSettings(
        bucket_size=BUCKET_SIZE,
        first_time_bucket=format_first_time_bucket(time.time_ns() // 1_000_000 - 3_600_000),
        flush_interval=timedelta(milliseconds=50),
    )
    with stores_at(journal) as stores:
        stores.tokens.initialize(PROCESSOR, segment_count=SEGMENTS)
        with stores.tokens.batch(PROCESSOR, 0, "demo") as batch:
            batch.connection.execute(ORDER_TOTALS_TABLE)
    is_embedded = isinstance(parse_location(journal), SQLiteLocation)
    if is_embedded:
        start_capture(journal)
    progress = Progress()
    written: list[WriteReport] = []
    stop_writing = threading.Event()

    def write() -> None:
        with contextlib.suppress(WritersStopped):  # the run failed or was interrupted
            written.append(
                run_writers(
                    WriterPlan(url=journal, workload=workload, settings=settings),
                    on_progress=lambda n: setattr(progress, "written", n),
                    stop=stop_writing,
                )
            )

    writers = threading.Thread(target=write, name="ordo-demo-writers")
    on_progress(progress)
    _start_python_workers(spark)
    query = projection(
        spark,
        ProjectionSpec(processor=PROCESSOR, sink=journal, handler=count_order_events),
        source_options={
            "journal": journal,
            "tag": TAG,
            "processor": PROCESSOR,
            "segments": str(SEGMENTS),
            "bucketSize": BUCKET_SIZE.value,  # the writers' (not ORDO_BUCKET_SIZE)
            "firstTimeBucket": settings.first_time_bucket,
            "eventualConsistencyDelayMs": "500",
            "backTrackIntervalMs": "500",
        },
        checkpoint=str(work_dir / "checkpoint"),
        processing_time="250 milliseconds",
    )
    try:
        _wait_for_first_trigger(query)
        progress.writing_since = time.monotonic()
        writers.start()
        _watch(journal, query, progress, writers, on_progress, split_at=workload.events // 2)
    except BaseException:  # SIGTERM reached this process alone, not its writers: stop them
        stop_writing.set()
        raise
    finally:
        query.stop()
        if writers.ident is not None:
            writers.join()
    seconds = time.monotonic() - (progress.writing_since or time.monotonic())
    cdc = run_cdc_part(spark, journal=journal, work_dir=work_dir) if is_embedded else None
    return _verdict(journal, written[0] if written else None, seconds, cdc)


def _start_python_workers(spark: SparkSession) -> None:
    """Fork Spark's Python workers and import the projection's modules in them now.

    Workers are reused from task to task; without this the first micro-batch with events
    starts them while the writers hold the CPU (seconds on two cores), and the projection
    falls behind the whole workload at once.
    """
    slots = spark.sparkContext.defaultParallelism
    spark.sparkContext.parallelize(range(slots), slots).foreach(_import_task_modules)
    spark.range(slots, numPartitions=slots).mapInArrow(_import_reader_modules, "id long").collect()


def _import_task_modules(_: int) -> None:
    import ordo.spark.projection
    import ordo.spark.reading  # noqa: F401


def _import_reader_modules(batches: Any) -> Any:
    import ordo.spark.reading  # noqa: F401

    yield from batches


def _wait_for_first_trigger(query: Any, *, timeout_s: float = 120) -> None:
    """Wait until the stream has run its first trigger, then the writers start.

    Before it, Spark starts the source's Python process on the driver and the planner reads
    the token store: seconds on a small machine, in which writers started at once would write
    most of the workload, so the projection would read it all in one micro-batch afterwards and
    the split would come before any micro-batch. A running projection that writers write to is
    what the demo shows.
    """
    deadline = time.monotonic() + timeout_s
    while query.lastProgress is None and time.monotonic() < deadline:
        _raise_failure(query)
        time.sleep(0.2)


def _raise_failure(query: Any) -> None:
    """Raise the exception that stopped the query, or QueryFailedError if it was stopped.

    Ctrl-C stops it (`run_job`): the projection would not catch up any more, and the watch
    waited for it up to a minute after the writers.
    """
    failure = query.exception()
    if failure is not None:
        raise failure
    if not query.isActive:
        msg = "the demo's projection was stopped before it caught up"
        raise QueryFailedError(msg)


def _watch(
    journal: str,
    query: Any,
    progress: Progress,
    writers: threading.Thread,
    on_progress: Callable[[Progress], None],
    *,
    split_at: int,
) -> None:
    """Refresh the progress until the writers are done and the projection has caught up.

    Segment 0 is split once `split_at` events are written and a micro-batch has run: the
    planner picks the new segments up at the next micro-batch, while the stream runs.
    """
    deadline: float | None = None
    with stores_at(journal) as stores:
        while True:
            _raise_failure(query)
            _measure(stores, progress, query)
            on_progress(progress)
            if (
                not progress.split
                and progress.batches
                and (progress.written >= split_at or not writers.is_alive())
            ):
                receipt = split_segment(
                    stores.tokens,
                    PROCESSOR,
                    0,
                    now_ms=time.time_ns() // 1_000_000,
                    claim_timeout_ms=0,
                )
                progress.split = receipt.message
            if not writers.is_alive():
                deadline = deadline or time.monotonic() + 60
                if progress.projected >= progress.tagged or time.monotonic() > deadline:
                    return
            time.sleep(0.5)


def _measure(stores: Stores, progress: Progress, query: Any) -> None:
    """Lag per segment: events in tag_views not yet projected, by the segments of now."""
    heads = stores.tag_views.heads(Tag(TAG))
    positions = stores.tokens.positions(PROCESSOR)
    segments = [entry.segment for entry in stores.tokens.entries(PROCESSOR)]
    lag = {str(segment): 0 for segment in segments}
    for pid, head in heads.items():
        behind = head - positions.get(pid, 0)
        if behind > 0:
            owner = next(s for s in segments if s.matches(stable_hash(pid)))
            lag[str(owner)] += behind
    progress.segments = lag
    progress.tagged = sum(heads.values())
    progress.projected = sum(min(positions.get(pid, 0), head) for pid, head in heads.items())
    last = query.lastProgress
    if last is not None:
        progress.batch_ms = int(last.durationMs.get("triggerExecution", 0))
        progress.batches = int(last.batchId) + 1


def _read_model(stores: Stores) -> list[tuple[str, int, int, int]]:
    """The projection's table, read in a transaction of the token store's database."""
    with stores.tokens.batch(PROCESSOR, 0, "demo") as batch:
        rows = batch.connection.execute(
            "SELECT pid, events, last_nr, misordered FROM order_totals"
        ).fetchall()
    return [(str(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in rows]


def _verdict(
    journal: str,
    written: WriteReport | None,
    seconds: float,
    cdc: CdcDemoReport | None,
) -> DemoReport:
    with stores_at(journal) as stores:
        tag_views = check_tag_views_of(stores, BUCKET_SIZE)
        heads = stores.tag_views.heads(Tag(TAG))
        model = {
            pid: (events, last, misordered) for pid, events, last, misordered in _read_model(stores)
        }
        segments = len(stores.tokens.entries(PROCESSOR))
    lost = duplicated = misordered_total = 0
    for pid, head in heads.items():
        events, last, misordered = model.get(pid, (0, 0, 0))
        lost += max(0, head - events)
        duplicated += max(0, events - head) + max(0, events - last)
        misordered_total += misordered
    return DemoReport(
        events=written.events if written else 0,
        tagged=sum(heads.values()),
        segments=segments,
        lost=lost,
        duplicated=duplicated,
        misordered=misordered_total,
        tag_views_clean=tag_views.is_clean,
        seconds=seconds,
        cdc=cdc,
    )
