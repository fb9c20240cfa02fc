"""`ordo_events_by_tag` checkpoints on a real local Spark: which journal their offsets are of."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from checkpoint_support import journal_id_of, without_journal_ids
from order_stream_support import OPTIONS, append_orders
from ordo.spark.checkpoint import last_planned_offset

pytestmark = pytest.mark.spark


def _run(spark: SparkSession, url: str, *, checkpoint: Path, output: Path) -> int:
    """Stream `url`'s order tag into Parquet files from `checkpoint` until caught up, in
    batches of ten events at most (the tests' runs make one to three).

    The events delivered, as the query's progress counts them.
    """
    query = (
        spark.readStream.format("ordo_events_by_tag")
        .options(**OPTIONS, journal=url, maxEventsPerTrigger="10")
        .load()
        .writeStream.format("parquet")  # the memory sink cannot resume from a checkpoint
        .option("path", str(output))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    if query.exception() is not None:
        raise query.exception()  # type: ignore[misc]
    return sum(progress["numInputRows"] for progress in query.recentProgress)


def _batches(checkpoint: Path, log: str) -> list[str]:
    return sorted(entry.name for entry in (checkpoint / log).iterdir() if entry.name.isdigit())


@pytest.mark.parametrize("committed", [True, False])
def test_a_checkpoint_of_another_journal_is_refused_instead_of_skipping_its_events(
    spark: SparkSession, tmp_path: Path, committed: bool
) -> None:
    """Offsets named no journal: the other journal's events, all older than the checkpoint's
    position, were skipped, and the query reported success having delivered nothing. Not
    `committed`: the query stopped after planning its last batch, which a restart runs again
    before it plans anything (so before the source opens the journal to plan)."""
    other = f"sqlite:///{tmp_path / 'other.db'}"
    append_orders(other, 0, 14)  # older than every event of the journal the checkpoint is of
    url = f"sqlite:///{tmp_path / 'journal.db'}"
    append_orders(url, 0, 21)
    checkpoint = tmp_path / "checkpoint"
    assert _run(spark, url, checkpoint=checkpoint, output=tmp_path / "first") == 21
    if not committed:
        newest = _batches(checkpoint, "commits")[-1]
        (checkpoint / "commits" / newest).unlink()
        (checkpoint / "commits" / f".{newest}.crc").unlink(missing_ok=True)
    offsets = _batches(checkpoint, "offsets")

    with pytest.raises(StreamingQueryException, match="CheckpointMismatchError") as refused:
        _run(spark, other, checkpoint=checkpoint, output=tmp_path / "other")

    assert (
        f"a query of journal='{journal_id_of(tmp_path / 'journal.db')}', this query's journal is "
        f"'{journal_id_of(tmp_path / 'other.db')}' (the id of {other})"
    ) in str(refused.value)
    assert _batches(checkpoint, "offsets") == offsets
    assert not list((tmp_path / "other").glob("*.parquet"))
    assert _run(spark, other, checkpoint=tmp_path / "own", output=tmp_path / "own-output") == 14


def test_a_checkpoint_whose_offsets_name_no_journal_still_resumes_and_then_names_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    """An ordo before the journal's id wrote such checkpoints: nothing tells the journal of
    one, so it resumes, and the next batch's offset records the journal read."""
    url = f"sqlite:///{tmp_path / 'journal.db'}"
    append_orders(url, 0, 14)
    checkpoint, output = tmp_path / "checkpoint", tmp_path / "output"
    assert _run(spark, url, checkpoint=checkpoint, output=output) == 14
    assert without_journal_ids(checkpoint) > 0
    append_orders(url, 14, 7)

    assert _run(spark, url, checkpoint=checkpoint, output=output) == 7

    delivered = spark.read.parquet(str(output)).select("persistence_id", "tag_pid_sequence_nr")
    assert (delivered.count(), delivered.distinct().count()) == (21, 21)
    newest = last_planned_offset(checkpoint)
    assert newest is not None
    journal_id = journal_id_of(tmp_path / "journal.db")
    assert journal_id is not None
    assert newest.get("journal_id") == journal_id
