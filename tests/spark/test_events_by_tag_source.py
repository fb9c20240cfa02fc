"""`ordo_events_by_tag` on a real local Spark: batch and streaming reads of a tag."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pyspark.errors import PySparkException, StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming.readwriter import DataStreamWriter

from operations_support import execute
from order_stream_support import OPTIONS, WRITE, append_orders
from ordo import NewEvent, open_journal
from ordo.hashing import stable_hash
from ordo.time import format_first_time_bucket

pytestmark = pytest.mark.spark


def _journal(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'journal.db'}"


def _into_memory(spark: SparkSession, options: dict[str, str], name: str) -> DataStreamWriter:
    """A stream of `options` into the memory table `name`, to be given its trigger and started."""
    stream = spark.readStream.format("ordo_events_by_tag").options(**options).load()
    return stream.writeStream.format("memory").queryName(name)


def _run_to_parquet(
    spark: SparkSession, options: dict[str, str], *, output: Path, checkpoint: Path
) -> None:
    """Define the stream (`load()`), run it into Parquet files until it caught up
    (availableNow) and wait for it (120 s at most).

    Parquet, as the memory sink cannot resume from a checkpoint.
    """
    stream = spark.readStream.format("ordo_events_by_tag").options(**options).load()
    writer = stream.writeStream.format("parquet").option("path", str(output))
    query = writer.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    query.awaitTermination(120)


def _gapped_journal(url: str) -> str:
    """The journal at `url` (either backend), whose tag views lost order-1's tag pid sequence
    nr 2 of 3 for good; `url`."""
    with open_journal(url, settings=WRITE) as journal:
        journal.append("order-1", [NewEvent.of(i, tags=["order"]) for i in range(3)])
    execute(url, "DELETE FROM tag_views WHERE tag_pid_sequence_nr = 2")
    return url


def test_a_batch_read_gives_every_event_once_ordered_per_persistence_id(
    spark: SparkSession, tmp_path: Path
) -> None:
    url = _journal(tmp_path)
    append_orders(url, 0, 70)
    frame = (
        spark.read.format("ordo_events_by_tag").options(**OPTIONS, journal=url, segments="4").load()
    )
    rows = frame.collect()
    assert len(rows) == 70
    per_pid: dict[str, list[int]] = {}
    for row in rows:
        per_pid.setdefault(row.persistence_id, []).append(row.tag_pid_sequence_nr)
        segment_id, mask = map(int, row.segment.split("/"))
        assert stable_hash(row.persistence_id) & mask == segment_id
    assert per_pid == {f"order-{p}": list(range(1, 11)) for p in range(7)}
    assert rows[0].payload.startswith(b"{")


def test_a_checkpoint_of_another_tag_is_refused_instead_of_skipping_its_events(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The invoices were written before the orders: resuming at the orders' position skipped
    them all, and the query reported success having delivered nothing."""
    url = _journal(tmp_path)
    with open_journal(url, settings=WRITE) as journal:
        journal.append("invoice-1", [NewEvent.of(i, tags=["invoice"]) for i in range(3)])
    append_orders(url, 0, 7)
    checkpoint = tmp_path / "checkpoint"

    def run(tag: str) -> str:
        output = tmp_path / tag
        options = {**OPTIONS, "tag": tag, "journal": url}
        _run_to_parquet(spark, options, output=output, checkpoint=checkpoint)
        return str(output)

    assert spark.read.parquet(run("order")).count() == 7
    with pytest.raises(StreamingQueryException, match="CheckpointMismatchError") as caught:
        run("invoice")
    assert "tag='order', this query's tag is 'invoice'" in str(caught.value)


def test_a_stream_resumed_from_its_checkpoint_delivers_everything_once(
    spark: SparkSession, journal_url: str, tmp_path: Path
) -> None:
    url = journal_url
    checkpoint, output = tmp_path / "checkpoint", tmp_path / "output"

    def run_once() -> None:
        options = {**OPTIONS, "journal": url, "segments": "2", "maxEventsPerTrigger": "25"}
        _run_to_parquet(spark, options, output=output, checkpoint=checkpoint)

    append_orders(url, 0, 60)
    run_once()
    append_orders(url, 60, 40)
    run_once()
    delivered = [
        (r.persistence_id, r.tag_pid_sequence_nr) for r in spark.read.parquet(str(output)).collect()
    ]
    assert sorted(delivered) == sorted((f"order-{i % 7}", i // 7 + 1) for i in range(100))


YEAR_AGO = format_first_time_bucket(time.time_ns() // 1_000_000 - 366 * 24 * 3_600_000)


def test_reads_from_a_first_time_bucket_long_ago_walk_every_empty_bucket(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Thousands of empty buckets before the events: no plan may look like "no new data".

    An availableNow query took such a plan for the end and stopped having read nothing.
    """
    url = _journal(tmp_path)
    append_orders(url, 0, 14)
    options = {**OPTIONS, "journal": url, "firstTimeBucket": YEAR_AGO}
    assert spark.read.format("ordo_events_by_tag").options(**options).load().count() == 14
    query = _into_memory(spark, options, "year_ago").trigger(availableNow=True).start()
    query.awaitTermination(120)
    assert spark.table("year_ago").count() == 14


def test_a_batch_read_with_a_gap_that_cannot_be_filled_fails_with_the_error(
    spark: SparkSession, tmp_path: Path
) -> None:
    """As the library's current(): never a silent skip of the events after the gap."""
    url = _gapped_journal(_journal(tmp_path))
    frame = (
        spark.read.format("ordo_events_by_tag")
        .options(**OPTIONS, journal=url, gapTimeoutMs="300")
        .load()
    )
    with pytest.raises(PySparkException, match="missing tagged events"):
        frame.collect()


def test_unknown_options_list_the_valid_ones(spark: SparkSession, tmp_path: Path) -> None:
    reader = spark.read.format("ordo_events_by_tag").options(
        journal=_journal(tmp_path), tag="order", colour="blue"
    )
    with pytest.raises(PySparkException, match="unknown option"):
        reader.load().collect()


def test_a_misspelt_option_is_named_lower_cased_with_the_valid_one_in_camel_case(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Spark lower-cases option names before the source sees them, so the error showed
    'maxeventspertriger' as if the user had typed it so, and listed the valid ones without
    saying why the case differs or which one was meant."""
    reader = (
        spark.read.format("ordo_events_by_tag")
        .options(journal=_journal(tmp_path), tag="order")
        .option("maxEventsPerTriger", 1)
    )
    with pytest.raises(PySparkException) as caught:
        reader.load()
    assert (
        "ordo_events_by_tag has unknown option 'maxeventspertriger' (did you mean "
        "maxEventsPerTrigger?); option names are case-insensitive, and Spark hands them to the "
        "source lower-cased (valid options: journal, tag, startingOffsets, maxEventsPerTrigger,"
    ) in str(caught.value)


def test_a_gap_that_cannot_be_filled_stops_the_stream_with_the_error(
    spark: SparkSession, journal_url: str
) -> None:
    url = _gapped_journal(journal_url)
    options = {**OPTIONS, "journal": url, "gapTimeoutMs": "300"}
    writer = _into_memory(spark, options, "gapped")
    query = writer.trigger(processingTime="200 milliseconds").start()
    try:
        with pytest.raises(StreamingQueryException, match="missing tagged events") as caught:
            query.awaitTermination(60)
    finally:
        query.stop()
    assert "last_known_offset" in str(caught.value)


def test_an_unknown_tag_is_an_empty_stream(spark: SparkSession, tmp_path: Path) -> None:
    url = _journal(tmp_path)
    append_orders(url, 0, 5)
    frame = spark.read.format("ordo_events_by_tag").options(**OPTIONS, journal=url).load()
    assert frame.filter("tag_pid_sequence_nr > 0").count() == 5
    other = {**OPTIONS, "tag": "no-such-tag"}
    assert spark.read.format("ordo_events_by_tag").options(**other, journal=url).load().count() == 0


def test_a_journal_that_cannot_be_opened_is_an_error(spark: SparkSession) -> None:
    reader = spark.read.format("ordo_events_by_tag").options(
        **OPTIONS, journal="postgresql://nobody@127.0.0.1:1/none"
    )
    with pytest.raises(PySparkException, match="cannot connect to PostgreSQL"):
        reader.load().collect()


def test_a_batch_read_from_latest_is_refused_naming_the_option(
    spark: SparkSession, tmp_path: Path
) -> None:
    """`latest` is where a stream waits for new events; a batch read from it read everything."""
    url = _journal(tmp_path)
    append_orders(url, 0, 7)
    frame = (
        spark.read.format("ordo_events_by_tag")
        .options(**OPTIONS, journal=url, startingOffsets="latest")
        .load()
    )
    with pytest.raises(PySparkException, match="startingOffsets cannot be latest for a batch"):
        frame.count()


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        ({"colour": "blue"}, "unknown option 'colour'"),
        ({"journal": "sqlite:///{tmp}/missing.db"}, "no journal at"),
        ({"startingOffsets": "yesterday"}, "yesterday"),
    ],
)
def test_a_stream_with_a_bad_option_fails_at_load_before_a_checkpoint_is_made(
    spark: SparkSession, tmp_path: Path, bad: dict[str, str], needle: str
) -> None:
    """It failed after `start()` had created the checkpoint, behind PySpark's UnboundLocalError."""
    url = _journal(tmp_path)
    append_orders(url, 0, 1)
    given = {**OPTIONS, "journal": url}
    given.update({key: value.format(tmp=tmp_path) for key, value in bad.items()})
    checkpoint = tmp_path / "checkpoint"
    with pytest.raises(PySparkException, match=needle) as caught:
        _run_to_parquet(spark, given, output=tmp_path / "out", checkpoint=checkpoint)
    assert "UnboundLocalError" not in str(caught.value)
    assert not checkpoint.exists()
