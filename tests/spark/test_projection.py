"""Spark projections: the handler's table equals the fold of the journal, exactly once."""

from __future__ import annotations

import pickle
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from pyspark import cloudpickle
from pyspark.errors import StreamingQueryException
from pyspark.sql import Row, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from checkpoint_support import journal_id_of, without_journal_ids
from operations_support import duplicate_tag_view, execute
from ordo import EventsByTagSettings, NewEvent, open_journal
from ordo.cli.root import cli
from ordo.clock import ManualClock
from ordo.errors import (
    CheckpointMismatchError,
    ConfigurationError,
    InvalidIdentifierError,
    ProjectionGapError,
    TimeToLiveTooShortError,
    UnableToClaimTokenError,
)
from ordo.processing import HandlerContext, merge_segment, split_segment
from ordo.query import EventEnvelope
from ordo.spark import ProjectionSpec, projection
from ordo.spark.demo import ORDER_TOTALS_TABLE, count_order_events
from ordo.spark.projection import apply_partition
from ordo.storage.open import stores_at
from ordo.time import TimeUUID, format_first_time_bucket
from ordo.tools import Cleanup
from ordo.tools.status import processor_status
from postgres_source_support import with_server_option
from processing_support import wait_for

pytestmark = pytest.mark.spark

# Spark's workers cannot import this test module: ship its handlers by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]

FIRST = format_first_time_bucket(time.time_ns() // 1_000_000 - 3_600_000)
WRITE = EventsByTagSettings(first_time_bucket=FIRST, flush_interval=timedelta(0))


def _append(url: str, start: int, count_: int) -> None:
    with open_journal(url, settings=WRITE) as journal:
        for i in range(start, start + count_):
            journal.append(f"order-{i % 9}", [NewEvent.of({"i": i}, tags=["order"])])


def _source(url: str, segments: str, delay_ms: str = "0", **more: str) -> dict[str, str]:
    """The `ordo_events_by_tag` options of these tests: the order tag of `url`."""
    return {
        "journal": url,
        "tag": "order",
        "firstTimeBucket": FIRST,
        "eventualConsistencyDelayMs": delay_ms,
        "segments": segments,
        **more,
    }


def _totals_table(url: str) -> str:
    """Create the demo's order_totals table in the database at `url` (either backend); `url`."""
    execute(url, ORDER_TOTALS_TABLE)
    return url


def _totals_journal(tmp_path: Path) -> str:
    """The URL of an SQLite journal file, journal.db in `tmp_path`, with the demo's order_totals
    table."""
    return _totals_table(f"sqlite:///{tmp_path / 'journal.db'}")


def _totals(url: str) -> dict[str, int]:
    """The demo's totals in `url` (either backend), each checked to be a gapless, ordered count."""
    rows = execute(url, "SELECT pid, events, last_nr, misordered FROM order_totals")
    assert all(events == last and misordered == 0 for _, events, last, misordered in rows)
    return {pid: events for pid, events, _, _ in rows}


def _start(
    spark: SparkSession,
    spec: ProjectionSpec,
    options: dict[str, str],
    checkpoint: Path,
    *,
    every: str | None = None,
) -> StreamingQuery:
    """Start `spec`'s projection of the source `options`: to run until it caught up
    (availableNow), or with `every`, a processing time, until it is stopped."""
    return projection(
        spark,
        spec,
        source_options=options,
        checkpoint=str(checkpoint),
        available_now=every is None,
        processing_time=every,
    )


def _run(
    spark: SparkSession,
    url: str,
    checkpoint: Path,
    segments: str = "3",
    processor: str = "totals",
    *,
    named: bool = False,
) -> None:
    """Run the projection until it caught up; `named`: its source names it as its processor."""
    spec = ProjectionSpec(processor=processor, sink=url, handler=count_order_events)
    more = {"processor": processor} if named else {}
    options = _source(url, segments, maxEventsPerTrigger="40", **more)
    query = _start(spark, spec, options, checkpoint)
    query.awaitTermination(180)
    assert query.exception() is None


async def _awaited_count(event: EventEnvelope, context: HandlerContext) -> None:
    """Its calls made coroutines nothing awaited: every event was recorded as applied."""


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("processor", None, InvalidIdentifierError),
        ("processor", "", InvalidIdentifierError),
        ("sink", None, ConfigurationError),
        ("handler", None, ConfigurationError),
        ("handler", _awaited_count, ConfigurationError),
        ("dead_letters", "no", ConfigurationError),
        ("sequencing_property", "", ConfigurationError),
        ("claim_timeout", 10_000, ConfigurationError),
        ("claim_timeout", timedelta(0), ConfigurationError),
        ("claim_timeout", timedelta(microseconds=999), ConfigurationError),
        ("claim_timeout", timedelta(days=36_501), ConfigurationError),
    ],
)
def test_a_projection_spec_refuses_fields_of_the_wrong_kind(
    field: str, value: object, error: type[Exception]
) -> None:
    """They failed in the tasks (a handler that is not callable, on every event: into the dead
    letters with dead_letters on), or in the driver after a batch was applied (claim_timeout
    in milliseconds), or were taken for something else (dead_letters="no" kept them)."""
    values: dict[str, object] = {
        "processor": "totals",
        "sink": "sqlite:///sink.db",
        "handler": count_order_events,
        field: value,
    }
    with pytest.raises(error, match=f"^{field}"):
        ProjectionSpec(**values)  # type: ignore[arg-type]


def test_a_projection_applies_every_event_once_across_restarts_and_replays(
    spark: SparkSession, journal_url: str, tmp_path: Path
) -> None:
    url = _totals_table(journal_url)
    _append(url, 0, 90)
    _run(spark, url, tmp_path / "checkpoint")
    assert _totals(url) == {f"order-{p}": 10 for p in range(9)}
    _append(url, 90, 45)
    _run(spark, url, tmp_path / "checkpoint", segments="2")  # resumed from the checkpoint
    assert _totals(url) == {f"order-{p}": 15 for p in range(9)}
    _run(spark, url, tmp_path / "fresh-checkpoint", segments="4")  # replays every batch
    assert _totals(url) == {f"order-{p}": 15 for p in range(9)}


def _newest_offset(url: str) -> str:
    ((key,),) = execute(url, "SELECT max(timeuuid) FROM tag_views")
    return str(TimeUUID.from_bytes(bytes(key)))


def test_a_projection_stores_how_far_it_applied_as_its_tokens(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Status showed every segment at start, and the whole journal as its lag, for ever; a
    segment whose claim expired (its owner crashed) kept its token for ever too."""
    url = _totals_journal(tmp_path)

    def status() -> tuple[list[str | None], list[str | None], int | None]:
        with stores_at(url) as stores:
            found = processor_status(
                stores.tokens, stores.operations, "totals", now_ms=0, claim_timeout_ms=10_000
            )
        segments = found.segments
        return [s.token for s in segments], [s.owner for s in segments], found.lag_events

    _append(url, 0, 90)
    _run(spark, url, tmp_path / "checkpoint", named=True)
    assert _totals(url) == {f"order-{p}": 10 for p in range(9)}
    assert status() == ([_newest_offset(url)] * 3, [None] * 3, 0)  # it holds no claim
    with stores_at(url) as stores:  # a tracking processor of its name crashed holding one
        stores.tokens.claim("totals", 1, "crashed", now_ms=0, claim_timeout_ms=1)
    _append(url, 90, 9)
    assert status()[2] == 9
    _run(spark, url, tmp_path / "checkpoint", named=True)
    assert status() == ([_newest_offset(url)] * 3, [None] * 3, 0)


def test_expiry_judges_a_projection_by_what_it_applied(spark: SparkSession, tmp_path: Path) -> None:
    """Expiry refused for every projection ('nothing read yet'), which made --force routine."""
    url = _totals_journal(tmp_path)
    for minutes_ago, start in ((50, 0), (40, 9)):
        clock = ManualClock(time.time_ns() - minutes_ago * 60 * 10**9)
        with open_journal(url, settings=WRITE, clock=clock) as journal:
            for i in range(start, start + 9):
                journal.append(f"order-{i % 9}", [NewEvent.of({"i": i}, tags=["order"])])
        if minutes_ago == 50:
            _run(spark, url, tmp_path / "checkpoint", named=True)
    half_an_hour = timedelta(minutes=30)
    with (  # the events of 40 minutes ago are not applied yet
        stores_at(url) as stores,
        pytest.raises(TimeToLiveTooShortError, match="'totals'"),
    ):
        Cleanup.of(stores).expire(half_an_hour, dry_run=True)
    _append(url, 18, 9)
    _run(spark, url, tmp_path / "checkpoint", named=True)
    assert _totals(url) == {f"order-{p}": 3 for p in range(9)}
    with stores_at(url) as stores:
        receipt = Cleanup.of(stores).expire(half_an_hour)
    assert (receipt.deleted, receipt.lagging) == (18, {})


def test_a_checkpoint_of_another_processor_is_refused_instead_of_resumed(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Another processor given the first one's checkpoint resumed at its offset: it applied
    nothing of what came before, and the run succeeded."""
    url = _totals_journal(tmp_path)
    _append(url, 0, 18)
    _run(spark, url, tmp_path / "checkpoint")

    with pytest.raises(CheckpointMismatchError) as refused:  # before the query starts
        _run(spark, url, tmp_path / "checkpoint", processor="other")

    assert "processor='totals', this query's processor is 'other'" in str(refused.value)
    assert _totals(url) == {f"order-{p}": 2 for p in range(9)}
    _run(spark, url, tmp_path / "other-checkpoint", processor="other")
    with stores_at(url) as stores:
        assert stores.tokens.positions("other") == stores.tokens.positions("totals")
        assert len(stores.tokens.positions("other")) == 9


@pytest.mark.parametrize(
    ("named", "older"),
    [
        (False, False),  # nothing told the journals apart: the query resumed
        (True, False),
        (True, True),  # offsets of an ordo before the journal's id: the tokens tell
    ],
)
def test_a_checkpoint_of_another_journal_is_refused_instead_of_resumed(
    spark: SparkSession, tmp_path: Path, named: bool, older: bool
) -> None:
    """Offsets named no journal: the query went on after the first journal's position and
    skipped, silently, every event of the other journal before it. `named`: the source names
    the projection as its processor (whose tokens the journal then holds)."""
    (tmp_path / "other").mkdir()
    other_url = _totals_journal(tmp_path / "other")
    _append(other_url, 0, 9)  # older than every event of the first journal
    url = _totals_journal(tmp_path)
    _append(url, 0, 18)
    _run(spark, url, tmp_path / "checkpoint", named=named)
    if older:
        without_journal_ids(tmp_path / "checkpoint")
    offsets = sorted(path.name for path in (tmp_path / "checkpoint" / "offsets").iterdir())

    with pytest.raises(CheckpointMismatchError) as refused:  # before the query starts
        _run(spark, other_url, tmp_path / "checkpoint", named=named)

    shown = (
        f"another journal, this query's journal is '{other_url}' (it has no tokens of processor "
        f"'totals', which {tmp_path / 'checkpoint'} holds batches of)"
        if older
        else f"journal='{journal_id_of(tmp_path / 'journal.db')}', this query's journal is "
        f"'{journal_id_of(tmp_path / 'other' / 'journal.db')}' (the id of {other_url})"
    )
    assert str(refused.value) == (
        f"the checkpoint was written by a query of {shown}: give it a checkpointLocation of its own"
    )
    assert sorted(path.name for path in (tmp_path / "checkpoint" / "offsets").iterdir()) == offsets
    assert _totals(other_url) == {}
    _run(spark, other_url, tmp_path / "other-checkpoint", named=named)
    assert _totals(other_url) == {f"order-{p}": 1 for p in range(9)}


def test_an_event_whose_tag_views_row_is_there_twice_is_applied_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    url = _totals_journal(tmp_path)
    _append(url, 0, 27)
    duplicate_tag_view(url, "order", "order-4", 1)
    _run(spark, url, tmp_path / "checkpoint")
    assert _totals(url) == {f"order-{p}": 3 for p in range(9)}


def test_a_partition_applies_an_event_handed_over_twice_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The positions read at the start of the batch do not cover a repeat within it."""
    url = _totals_journal(tmp_path)
    _append(url, 0, 18)
    twice = [row for row in _rows(spark, url) for _ in range(1 + (row.persistence_id == "order-4"))]
    spec = ProjectionSpec(processor="totals", sink=url, handler=count_order_events)

    apply_partition(spec, iter(twice))

    assert _totals(url) == {f"order-{p}": 2 for p in range(9)}


def test_a_projection_restarted_after_a_gap_stopped_it_stops_again_instead_of_skipping(
    spark: SparkSession, journal_url: str, tmp_path: Path
) -> None:
    """Resumed from its checkpoint, the source knows order-1 was applied up to nr 1, so nr 3
    is a gap again (it used to take it for order-1's first event, in a past bucket)."""
    url = _totals_table(journal_url)
    an_hour_ago = ManualClock(time.time_ns() - 3_600 * 10**9)
    with open_journal(url, settings=WRITE, clock=an_hour_ago) as journal:
        for pid, count_ in (("order-1", 1), ("order-2", 2), ("order-1", 2), ("order-2", 2)):
            journal.append(pid, [NewEvent.of(i, tags=["order"]) for i in range(count_)])
    execute(
        url, "DELETE FROM tag_views WHERE persistence_id = 'order-1' AND tag_pid_sequence_nr = 2"
    )

    def run() -> StreamingQueryException:
        spec = ProjectionSpec(processor="gapped", sink=url, handler=count_order_events)
        query = _start(spark, spec, _source(url, "1", gapTimeoutMs="300"), tmp_path / "checkpoint")
        with pytest.raises(StreamingQueryException) as raised:
            query.awaitTermination(180)
        return raised.value

    assert "missing tagged events" in str(run())
    restarted = str(run())
    assert "missing tagged events" in restarted
    assert "order-1" in restarted
    assert _totals(url) == {"order-1": 1, "order-2": 2}


@pytest.mark.parametrize("ago_s", [3_600, 0], ids=["past-bucket", "current-bucket"])
def test_a_reset_with_its_own_sink_lets_a_projection_go_on_past_a_gap(
    spark: SparkSession, tmp_path: Path, ago_s: int
) -> None:
    """The documented recovery: `processors reset --sink`, then a restart from the checkpoint.

    A reset of the journal left the sink's positions (the restart stopped at the gap again),
    and one of the sink said the processor had no tokens. Restarted after the reset cleared
    the positions, the source also looked back from the checkpoint's offset knowing none, so
    it applied the events just before it a second time. From a checkpoint in the current
    bucket, the query's start scan took order-1's event just before the offset for applied,
    so the restart stopped at the gap again.
    """
    journal, sink_path = tmp_path / "journal.db", tmp_path / "sink.db"
    url, sink = f"sqlite:///{journal}", f"sqlite:///{sink_path}"
    with closing(sqlite3.connect(sink_path)) as conn, conn:
        conn.execute(ORDER_TOTALS_TABLE)
    written_at = ManualClock(time.time_ns() - ago_s * 10**9)
    with open_journal(url, settings=WRITE, clock=written_at) as journal_:
        for pid, count_ in (("order-1", 1), ("order-2", 2), ("order-1", 2)):
            journal_.append(pid, [NewEvent.of(i, tags=["order"]) for i in range(count_)])
    execute(
        url, "DELETE FROM tag_views WHERE persistence_id = 'order-1' AND tag_pid_sequence_nr = 2"
    )

    def run() -> StreamingQueryException | None:
        spec = ProjectionSpec(processor="totals", sink=sink, handler=count_order_events)
        options = _source(url, "2", gapTimeoutMs="300", processor="totals")
        query = _start(spark, spec, options, tmp_path / "checkpoint")
        try:
            query.awaitTermination(180)
        except StreamingQueryException as failed:
            return failed
        return None

    assert "missing tagged events" in str(run())
    reset = ["processors", "reset", "totals", "--journal", url, "--sink", sink]
    assert CliRunner().invoke(cli, reset).exit_code == 0

    assert run() is None
    assert run() is None  # restarted again: its positions lack order-2, applied before the reset

    with closing(sqlite3.connect(sink_path)) as conn:
        totals = conn.execute("SELECT pid, events, last_nr, misordered FROM order_totals")
        assert sorted(totals) == [("order-1", 2, 3, 1), ("order-2", 2, 2, 0)]
    with stores_at(sink) as stores:
        assert stores.tokens.positions("totals") == {"order-1": 3}
    with stores_at(url) as stores:
        tokens = {str(entry.token) for entry in stores.tokens.entries("totals")}
    assert tokens == {_newest_offset(url)}


def test_a_partition_refuses_an_event_past_the_next_one_it_expects(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The executors' own check, for a source that does not know the positions."""
    url = _totals_journal(tmp_path)
    _append(url, 0, 18)
    spec = ProjectionSpec(processor="totals", sink=url, handler=count_order_events)
    apply_partition(spec, iter(_rows(spark, url)))
    _append(url, 18, 18)
    later = [
        r for r in _rows(spark, url) if (r.persistence_id, r.tag_pid_sequence_nr) != ("order-4", 3)
    ]

    with pytest.raises(
        ProjectionGapError, match="'order-4' was applied up to tag_pid_sequence_nr 2"
    ):
        apply_partition(spec, iter(later))

    assert _totals(url) == {f"order-{p}": 2 for p in range(9)}


def test_a_restarted_projection_hands_on_an_event_that_showed_up_behind_its_offset(
    spark: SparkSession, tmp_path: Path
) -> None:
    """order-1's nr 2 is written but not visible when order-2's first event (a later offset)
    is applied, so the checkpoint's offset passes it; then it shows up.

    The restarted source used to start after the offset: it never delivered nr 2, and took
    nr 3 for the next event (the start scan counted nr 2 as delivered) or for order-1's first,
    which the executors refused. It now starts back_track_period before the offset knowing
    the applied positions, so it hands nr 2 on.
    """
    url = _totals_journal(tmp_path)
    with open_journal(url, settings=WRITE) as journal:
        for _ in range(2):
            journal.append("order-1", [NewEvent.of(0, tags=["order"])])
    where = "FROM tag_views WHERE persistence_id = 'order-1' AND tag_pid_sequence_nr = 2"
    execute(url, f"CREATE TABLE late AS SELECT * {where}")
    execute(url, f"DELETE {where}")
    with open_journal(url, settings=WRITE) as journal:
        journal.append("order-2", [NewEvent.of(0, tags=["order"])])
    _run(spark, url, tmp_path / "checkpoint")
    assert _totals(url) == {"order-1": 1, "order-2": 1}
    execute(url, "INSERT INTO tag_views SELECT * FROM late")
    with open_journal(url, settings=WRITE) as journal:
        journal.append("order-1", [NewEvent.of(0, tags=["order"])])

    _run(spark, url, tmp_path / "checkpoint")

    assert _totals(url) == {"order-1": 3, "order-2": 1}


def _rows(spark: SparkSession, url: str) -> list[Row]:
    return spark.read.format("ordo_events_by_tag").options(**_source(url, "1")).load().collect()


def test_segments_split_and_merge_while_the_stream_runs(
    spark: SparkSession, journal_url: str, tmp_path: Path
) -> None:
    url = _totals_table(journal_url)
    _append(url, 0, 45)
    spec = ProjectionSpec(processor="live-totals", sink=url, handler=count_order_events)
    options = _source(url, "4", "100", processor="live-totals")
    query = _start(spark, spec, options, tmp_path / "checkpoint", every="200 milliseconds")
    try:
        wait_for(lambda: sum(_totals(url).values()) == 45, timeout=120)
        with stores_at(url) as stores:
            now = time.time_ns() // 1_000_000
            split_segment(stores.tokens, "live-totals", 1, now_ms=now, claim_timeout_ms=0)
            _append(url, 45, 45)
            wait_for(lambda: sum(_totals(url).values()) == 90, timeout=120)
            merge_segment(stores.tokens, "live-totals", 1, now_ms=now, claim_timeout_ms=0)
            assert len(stores.tokens.entries("live-totals")) == 4
        _append(url, 90, 45)
        wait_for(lambda: sum(_totals(url).values()) == 135, timeout=120)
    finally:
        query.stop()
    assert _totals(url) == {f"order-{p}": 15 for p in range(9)}


def test_a_running_projection_is_not_reset_until_it_is_stopped(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It holds no claim: the reset cleared its positions and tokens under the running query.

    Idle between micro-batches for longer than the claim timeout, it is running all the same.
    """
    journal, sink_path = tmp_path / "journal.db", tmp_path / "sink.db"
    url, sink = f"sqlite:///{journal}", f"sqlite:///{sink_path}"
    with closing(sqlite3.connect(sink_path)) as conn, conn:
        conn.execute(ORDER_TOTALS_TABLE)
    _append(url, 0, 18)
    spec = ProjectionSpec(processor="totals", sink=sink, handler=count_order_events)
    options = _source(url, "2", processor="totals")
    query = _start(spark, spec, options, tmp_path / "checkpoint", every="200 milliseconds")
    monkeypatch.setenv("ORDO_CLAIM_TIMEOUT_MS", "500")
    try:
        wait_for(lambda: sum(_totals(sink).values()) == 18, timeout=120)
        time.sleep(1)  # no new events: no micro-batch, for twice the claim timeout and more
        for also in ([], ["--sink", sink]):
            result = CliRunner().invoke(
                cli, ["processors", "reset", "totals", "--journal", url, *also]
            )
            assert (result.exit_code, result.stdout, result.stderr.count("\n")) == (1, "", 1)
            assert result.stderr.startswith(
                "Error: UnableToClaimTokenError: processor 'totals' is running (a Spark "
                "projection: its driver 'spark-driver-"
            )
            assert result.stderr.endswith(": stop its streaming query before resetting\n")
        with stores_at(sink) as stores:
            assert len(stores.tokens.positions("totals")) == 9
    finally:
        query.stop()
    reset = ["processors", "reset", "totals", "--journal", url, "--sink", sink]

    assert CliRunner().invoke(cli, reset).exit_code == 0

    with stores_at(sink) as stores:
        assert stores.tokens.positions("totals") == {}


DRIVER = Path(__file__).with_name("projection_driver.py")


@pytest.mark.postgres
def test_a_driver_killed_mid_run_resumes_to_the_same_projection(
    spark: SparkSession, postgres_dsn: str, tmp_path: Path
) -> None:
    """The killed driver is a process of its own; the test's session, another driver, resumes.

    On SQLite and on PostgreSQL (the server backend), a projection of each in the one killed
    driver (one Spark start for both): on PostgreSQL the tasks of a batch the kill cut short are
    rolled back by the server once their sessions drop, the row locks on their totals and
    positions with them, so the restart neither waits on them nor applies an event twice or
    not at all.
    """
    urls = [_totals_journal(tmp_path), _totals_table(postgres_dsn)]
    processors = ["killed-sqlite", "killed-postgres"]  # a query's name: one each in the driver
    queries = list(zip(urls, processors, [tmp_path / p for p in processors], strict=True))
    for url in urls:
        _append(url, 0, 90)
    driver = subprocess.Popen(
        [sys.executable, str(DRIVER), FIRST, *(str(part) for query in queries for part in query)]
    )
    try:
        wait_for(lambda: all(sum(_totals(url).values()) > 0 for url in urls), timeout=120)
        for url in urls:
            _append(url, 90, 90)
        driver.send_signal(signal.SIGKILL)  # mid-run: some batches done, some not
        driver.wait()
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    for url, processor, checkpoint in queries:
        with stores_at(url) as stores:  # its lease stays, and expires as a claim does
            now = time.time_ns() // 1_000_000
            with pytest.raises(UnableToClaimTokenError, match=f"'{processor}' is running"):
                stores.tokens.check_reset(processor, now_ms=now, claim_timeout_ms=10_000)
            stores.tokens.check_reset(processor, now_ms=now + 10_001, claim_timeout_ms=10_000)
        _run(spark, url, checkpoint, processor=processor)
        assert _totals(url) == {f"order-{p}": 20 for p in range(9)}


STALL_CHILD = Path(__file__).with_name("projection_stall_child.py")


@pytest.mark.postgres
def test_a_task_stopped_mid_batch_does_not_hold_up_another_drivers_batch(
    spark: SparkSession, postgres_dsn: str, tmp_path: Path
) -> None:
    """A task frozen inside its batch (SIGSTOP) keeps its transaction, and the rows it locked,
    open; the server ends it once it sits idle for the claim timeout, as a tracking
    processor's, so another driver's batch of the same events gets on instead of waiting for
    ever. The waiting batch's lock_timeout, far past the limit, only turns a hang into a
    failure."""
    url = _totals_table(postgres_dsn)
    _append(url, 0, 18)
    rows = _rows(spark, url)
    rows_file = tmp_path / "rows.pickle"
    rows_file.write_bytes(pickle.dumps(rows))
    child = subprocess.Popen(
        [sys.executable, str(STALL_CHILD), url, str(rows_file), "500"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "stalled"
        waiting = with_server_option(url, "-clock_timeout=20000")
        spec = ProjectionSpec(processor="totals", sink=waiting, handler=count_order_events)
        apply_partition(spec, iter(rows))
        assert _totals(url) == {f"order-{p}": 2 for p in range(9)}
        child.send_signal(signal.SIGCONT)  # its batch fails at its next statement
        assert child.wait(timeout=60) != 0
    finally:
        child.send_signal(signal.SIGCONT)
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    assert _totals(url) == {f"order-{p}": 2 for p in range(9)}


def _flaky_count(event: EventEnvelope, context: HandlerContext) -> None:
    """Fails on order-4's third event, counts the others."""
    if event.persistence_id == "order-4" and event.tag_pid_sequence_nr == 3:
        msg = "poison"
        raise ValueError(msg)
    count_order_events(event, context)


def test_a_poison_event_goes_to_the_dead_letters_and_the_rest_is_applied(
    spark: SparkSession, tmp_path: Path
) -> None:
    url = _totals_journal(tmp_path)
    _append(url, 0, 45)
    spec = ProjectionSpec(processor="dl", sink=url, handler=_flaky_count, dead_letters=True)
    query = _start(spark, spec, _source(url, "2"), tmp_path / "checkpoint")
    query.awaitTermination(180)
    with stores_at(url) as stores:
        letters = stores.tokens.dead_letters("dl")
    assert [(d.persistence_id, d.position) for d in letters] == [("order-4", 3)]
    assert "poison" in letters[0].error
    assert execute(url, "SELECT sum(events) FROM order_totals") == [(44,)]


def test_a_failing_handler_stops_the_projection_and_commits_nothing_of_its_segment(
    spark: SparkSession, tmp_path: Path
) -> None:
    url = _totals_journal(tmp_path)
    _append(url, 0, 45)
    spec = ProjectionSpec(processor="stop", sink=url, handler=_flaky_count)
    query = _start(spark, spec, _source(url, "1"), tmp_path / "checkpoint")
    with pytest.raises(StreamingQueryException, match="poison"):
        query.awaitTermination(180)
    assert execute(url, "SELECT count(*) FROM order_totals") == [(0,)]


def _by_customer(event: EventEnvelope, context: HandlerContext) -> None:
    """Count per customer; each customer's events must come in append order."""
    payload = event.payload
    assert isinstance(payload, dict)
    p, conn = context.placeholder, context.connection
    row = conn.execute(
        f"SELECT n, last_i FROM customers WHERE customer = {p}", (payload["customer"],)
    ).fetchone()
    n, last_i = row if row else (0, -1)
    if payload["i"] <= last_i:
        msg = f"{payload['customer']}: {payload['i']} after {last_i}"
        raise AssertionError(msg)
    conn.execute(
        f"INSERT INTO customers VALUES ({p}, {p}, {p}) ON CONFLICT (customer) DO UPDATE "
        "SET n = excluded.n, last_i = excluded.last_i",
        (payload["customer"], n + 1, payload["i"]),
    )


@pytest.mark.parametrize("frozen", [False, True], ids=["clock", "frozen-clock"])
def test_a_property_policy_sequences_by_the_property_value(
    spark: SparkSession, tmp_path: Path, *, frozen: bool
) -> None:
    """Frozen, the clock puts ten events in each microsecond (TimeUUIDs step by 100 ns): the
    events of a customer were sorted by microsecond, then persistence id, not by offset."""
    path = tmp_path / "journal.db"
    url = f"sqlite:///{path}"
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(
            "CREATE TABLE customers (customer TEXT PRIMARY KEY, n INTEGER, last_i INTEGER)"
        )
    clock = ManualClock(time.time_ns() // 1_000 * 1_000 - 60 * 10**9) if frozen else None
    with open_journal(url, settings=WRITE, clock=clock) as journal:
        for i in range(80):
            payload = {"customer": f"c{i % 4}", "i": i}
            journal.append(f"order-{i % 9}", [NewEvent.of(payload, tags=["order"])])
    spec = ProjectionSpec(
        processor="by-customer", sink=url, handler=_by_customer, sequencing_property="customer"
    )
    query = _start(spark, spec, _source(url, "3", processor="by-customer"), tmp_path / "checkpoint")
    query.awaitTermination(180)
    assert query.exception() is None
    with closing(sqlite3.connect(path)) as conn:
        counts = conn.execute("SELECT customer, n FROM customers").fetchall()
    assert sorted(counts) == [(f"c{c}", 20) for c in range(4)]
    # Its tasks' offsets interleave, but the driver stores the tokens once all have committed.
    with stores_at(url) as stores:
        tokens = {str(e.token) for e in stores.tokens.entries("by-customer")}
    assert tokens == {_newest_offset(url)}
