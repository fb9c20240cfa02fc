"""Rebuilding every tag view on Spark: journal -> numbers by window functions -> buckets -> upserts.

The journal's keys are read in persistence id ranges (`ordo_journal_keys`), each event's tags
exploded, and the tag pid sequence nrs recomputed with `row_number()` over (persistence_id,
tag) ordered by sequence_nr; time buckets come from the TimeUUID's time. The executors upsert
the rows through the operations store in Arrow-batch-sized transactions, the payloads copied
from `messages` inside the database, then set each (persistence id, tag)'s progress and each
id's tag_scanning. All rows of one (persistence id, tag) are in one task (the window's
partitioning), so progress is written after all of its rows, as the tag writer does. Events
before their tag's expiry horizon (ordo.tools.ports.ExpiryHorizons) are numbered and set the
progress but get no row: the expiry deleted it on purpose.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from ordo.clock import Clock, clock_or_system
from ordo.settings import OperationsSettings
from ordo.settings.operations import SPARK_KEY_PARTITIONS
from ordo.spark.operations_source import JournalKeysDataSource, TagViewKeysDataSource
from ordo.storage.open import existing_stores_at, stores_at
from ordo.tagging import TagProgress
from ordo.time import BucketSize, TimeUUID
from ordo.tools.guard import WriterGuard
from ordo.tools.operations_tool import recorded_bucket_size
from ordo.tools.ports import ExpiryHorizons, TagViewRow
from ordo.tools.receipts import OperationReceipt
from ordo.types import PersistenceId, SequenceNr, Tag, TagPidSequenceNr, TimeBucket


def register_operations_sources(spark: SparkSession) -> None:
    """Make `ordo_journal_keys` and `ordo_tag_view_keys` known to `spark`."""
    spark.dataSource.register(JournalKeysDataSource)
    spark.dataSource.register(TagViewKeysDataSource)


def journal_bucket_size(journal: str) -> BucketSize:
    """The bucket size the journal records (the default when it records none yet).

    Only read: `verify` and a dry run change nothing, and a rebuild has upgraded the journal.
    """
    with stores_at(journal, mode="read") as stores:
        return recorded_bucket_size(stores.journal)


def expected_rows(
    spark: SparkSession,
    journal: str,
    *,
    bucket_size: BucketSize,
    horizons: ExpiryHorizons,
    partitions: int,
) -> DataFrame:
    """What a fresh tag write of every journal event gives: one row per (event, tag).

    Columns: tag, persistence_id, sequence_nr, timeuuid, epoch_ms, tag_pid_sequence_nr,
    timebucket, expired. Numbers count on from the first event still in the journal (its stored
    number: 1 unless earlier events were deleted), as ordo.tools.tag_view_rows does; `expired`
    says the event is before its tag's horizon (no row should be written for it).
    """
    register_operations_sources(spark)
    keys = (
        spark.read.format("ordo_journal_keys")
        .option("journal", journal)
        .option("partitions", str(partitions))
        .load()
    )
    tagged = keys.select(
        "persistence_id",
        "sequence_nr",
        "timeuuid",
        "epoch_ms",
        F.explode(F.from_json("tags", "map<string,bigint>")).alias("tag", "stored_nr"),
    )
    per_tag = Window.partitionBy("persistence_id", "tag").orderBy("sequence_nr")
    number: Column = F.row_number().over(per_tag) + F.first("stored_nr").over(per_tag) - 1
    bucket: Column = F.col("epoch_ms") - F.pmod(F.col("epoch_ms"), F.lit(bucket_size.millis))
    per_tag_horizons = spark.createDataFrame(
        list(horizons.per_tag_ms.items()), "tag STRING, tag_horizon BIGINT"
    )
    # greatest() skips nulls: the later of the tag's own horizon and every tag's, if any.
    horizon = F.greatest("tag_horizon", F.lit(horizons.every_tag_ms).cast("bigint"))
    return tagged.join(F.broadcast(per_tag_horizons), on="tag", how="left").select(
        "tag",
        "persistence_id",
        "sequence_nr",
        "timeuuid",
        "epoch_ms",
        number.cast("bigint").alias("tag_pid_sequence_nr"),
        bucket.cast("bigint").alias("timebucket"),
        F.coalesce(F.col("epoch_ms") < horizon, F.lit(False)).alias("expired"),
    )


def rebuild_all(
    spark: SparkSession,
    journal: str,
    *,
    force: bool = False,
    dry_run: bool = False,
    partitions: int = SPARK_KEY_PARTITIONS,
    settings: OperationsSettings | None = None,
    clock: Clock | None = None,
) -> OperationReceipt:
    """Upsert the tag_views rows, progress and tag_scanning of every journal event.

    Idempotent; existing rows are overwritten, none are deleted (truncate first for a clean
    rebuild). Refused (ActiveWriterError) while any writer is live, unless `force`.
    """
    operation = "rebuild all tag views (spark)"
    clock = clock_or_system(clock)  # before stores_at creates a missing journal
    # A dry run only reads, as `verify` does: an older schema is refused, not upgraded.
    with existing_stores_at(journal) if dry_run else stores_at(journal) as stores:
        guard = WriterGuard(stores.operations, settings=settings, clock=clock)
        forced = guard.check(operation, None, force=force)
        horizons = stores.operations.expiry_horizons()
    frame = expected_rows(
        spark,
        journal,
        bucket_size=journal_bucket_size(journal),
        horizons=horizons,
        partitions=partitions,
    )
    if dry_run:
        written_rows = frame.where(~F.col("expired")).count()
        return OperationReceipt(
            operation=operation, written_rows=written_rows, is_dry_run=True, forced_past=forced
        )
    written = (
        frame.mapInArrow(partial(_write_partition, journal=journal), "rows BIGINT")
        .agg(F.sum("rows"))
        .collect()[0][0]
    )
    return OperationReceipt(operation=operation, written_rows=int(written or 0), forced_past=forced)


def _write_partition(
    batches: Iterator[pa.RecordBatch], *, journal: str
) -> Iterator[pa.RecordBatch]:
    """Executor side: upsert each batch's rows, then the partition's progress and scanning.

    Expired events write no row, but their numbers count for the progress and the scanning:
    recovery goes on from them and must not write them again.
    """
    last: dict[tuple[str, str], tuple[int, int, bytes]] = {}
    highest: dict[PersistenceId, SequenceNr] = {}
    written = 0
    with stores_at(journal, mode="write") as stores:
        for batch in batches:
            columns = batch.to_pydict()
            every = [
                TagViewRow(
                    tag=Tag(tag),
                    time_bucket=TimeBucket(bucket),
                    persistence_id=PersistenceId(pid),
                    sequence_nr=SequenceNr(seq),
                    tag_pid_sequence_nr=TagPidSequenceNr(number),
                )
                for tag, bucket, pid, seq, number in zip(
                    columns["tag"],
                    columns["timebucket"],
                    columns["persistence_id"],
                    columns["sequence_nr"],
                    columns["tag_pid_sequence_nr"],
                    strict=True,
                )
            ]
            rows = [r for r, expired in zip(every, columns["expired"], strict=True) if not expired]
            stores.operations.upsert_tag_view_rows(rows)
            written += len(rows)
            for row, uuid in zip(every, columns["timeuuid"], strict=True):
                key = (row.persistence_id, row.tag)
                if key not in last or last[key][0] < row.sequence_nr:
                    last[key] = (row.sequence_nr, row.tag_pid_sequence_nr, uuid)
                if highest.get(row.persistence_id, 0) < row.sequence_nr:
                    highest[row.persistence_id] = row.sequence_nr
        stores.operations.write_exact_progress(
            [
                TagProgress(
                    persistence_id=PersistenceId(pid),
                    tag=Tag(tag),
                    sequence_nr=SequenceNr(seq),
                    tag_pid_sequence_nr=TagPidSequenceNr(number),
                    timeuuid=TimeUUID.from_bytes(uuid),
                )
                for (pid, tag), (seq, number, uuid) in last.items()
            ]
        )
        stores.operations.write_tag_scanning(highest)
    yield pa.record_batch([pa.array([written], pa.int64())], names=["rows"])
