"""`ordo verify` on Spark: compare the journal with its tag views, row by row.

The expected rows are what a rebuild would write (ordo.spark.rebuild.expected_rows); the
actual rows are read by key (`ordo_tag_view_keys`). A row is matched to its event on (tag,
persistence_id, sequence_nr, timeuuid) and classified as ordo.tools.verify_report describes.
Problems are few in a healthy journal, so they are collected on the driver (up to
`sample_limit` per kind, plus every affected (tag, persistence id) pair for a repair).

Events before their tag's expiry horizon (ordo.tools.ports.ExpiryHorizons) had their rows
deleted on purpose: they are not looked for (not missing, and their numbers are no gap). A row
of one that is still there (an expiry that stopped half way) is still matched to its event.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F

from ordo.settings.operations import SPARK_KEY_PARTITIONS
from ordo.spark.rebuild import expected_rows, register_operations_sources
from ordo.storage.open import existing_stores_at
from ordo.tools.operations_tool import recorded_bucket_size
from ordo.tools.verify_report import Problem, ProblemKind, VerifyReport
from ordo.types import PersistenceId, Tag

SAMPLE_LIMIT = 100
_EVENT = ["tag", "persistence_id", "sequence_nr", "timeuuid"]
_KEPT = ("ok", "retained", ProblemKind.MISNUMBERED.value, ProblemKind.WRONG_BUCKET.value)
"""Row kinds whose numbers count for gaps: duplicates and orphans are not the event's row."""
_ROW_ONLY = ("ok", "retained")
"""Row kinds that are not problems (counted, not sampled)."""
_NOT_PROBLEMS = (*_ROW_ONLY, "expired")
"""Kinds of the classified rows that are not problems: "expired" is an event whose row an
expiry deleted on purpose (neither a row nor missing)."""
_ROW_KINDS = frozenset(
    {
        ProblemKind.ORPHANED,
        ProblemKind.DUPLICATED,
        ProblemKind.MISNUMBERED,
        ProblemKind.WRONG_BUCKET,
    }
)
"""Problem kinds that are tag_views rows (missing events and gaps are not)."""
_PROBLEM_COLUMNS = (
    "kind",
    "tag",
    "persistence_id",
    "sequence_nr",
    "tag_pid_sequence_nr",
    "expected_nr",
    "timebucket",
    "expected_bucket",
    "count",
)


def verify_tag_views(
    spark: SparkSession,
    journal: str,
    *,
    partitions: int = SPARK_KEY_PARTITIONS,
    sample_limit: int = SAMPLE_LIMIT,
) -> VerifyReport:
    """Run the comparison as Spark batch jobs; nothing is written.

    The journal is not upgraded either: an older schema is SchemaVersionError (`ordo init`).
    """
    with existing_stores_at(journal) as stores:
        bucket_size = recorded_bucket_size(stores.journal)
        deleted = stores.operations.deleted_persistence_ids()
        horizons = stores.operations.expiry_horizons()
    register_operations_sources(spark)
    expected = expected_rows(
        spark, journal, bucket_size=bucket_size, horizons=horizons, partitions=partitions
    ).select(
        *_EVENT,
        F.col("tag_pid_sequence_nr").alias("expected_nr"),
        F.col("timebucket").alias("expected_bucket"),
        "expired",
    )
    actual = (
        spark.read.format("ordo_tag_view_keys")
        .option("journal", journal)
        .option("partitions", str(partitions))
        .load()
    )
    deleted_to = spark.createDataFrame(
        [(pid, int(nr)) for pid, nr in deleted.items()], "persistence_id STRING, deleted_to BIGINT"
    )
    expected, actual = expected.cache(), actual.cache()  # each source is read once
    try:
        classified = _classify(actual, expected, deleted_to).cache()
        problems = (
            classified.where(~F.col("kind").isin(*_NOT_PROBLEMS))
            .select(*_PROBLEM_COLUMNS)
            .unionByName(_gaps(classified))
            .cache()
        )
        report = _report(classified, problems, sample_limit)
        problems.unpersist()
        classified.unpersist()
        return report
    finally:
        expected.unpersist()
        actual.unpersist()


def _classify(actual: DataFrame, expected: DataFrame, deleted_to: DataFrame) -> DataFrame:
    """Each row with its `kind` (see verify_report), its expected number and bucket.

    The rows and the events are joined in full: an event left without a row is one more row
    here, of kind MISSING, or "expired" if the expiry deleted its row on purpose (no problem). One
    join finds both, where a left join and an anti join shuffled each side twice.
    """
    joined = (
        actual.withColumn("is_row", F.lit(True))
        .join(expected, on=_EVENT, how="full")
        .join(F.broadcast(deleted_to), on="persistence_id", how="left")
    )
    is_matched = F.col("expected_nr").isNotNull()
    right_nr = F.col("tag_pid_sequence_nr") == F.col("expected_nr")
    right_bucket = F.col("timebucket") == F.col("expected_bucket")
    per_event = Window.partitionBy(*_EVENT).orderBy(
        F.desc(right_nr & right_bucket), F.desc(right_nr), "timebucket", "tag_pid_sequence_nr"
    )
    kind = (
        F.when(F.col("is_row").isNull() & F.col("expired"), "expired")
        .when(F.col("is_row").isNull(), ProblemKind.MISSING.value)
        .when(
            ~is_matched & (F.col("sequence_nr") <= F.coalesce("deleted_to", F.lit(0))),
            "retained",
        )
        .when(~is_matched, ProblemKind.ORPHANED.value)
        .when(F.row_number().over(per_event) > 1, ProblemKind.DUPLICATED.value)
        .when(~right_nr, ProblemKind.MISNUMBERED.value)
        .when(~right_bucket, ProblemKind.WRONG_BUCKET.value)
        .otherwise("ok")
    )
    number = F.when(F.col("is_row").isNull(), F.col("expected_nr")).otherwise(
        F.col("tag_pid_sequence_nr")
    )
    return (
        joined.withColumn("kind", kind)
        .withColumn("tag_pid_sequence_nr", number)
        .withColumn("count", F.lit(1).cast("bigint"))
    )


def _gaps(classified: DataFrame) -> DataFrame:
    """Runs of numbers absent from the kept rows of each (tag, persistence id).

    Only numbers from the first one of an event still in the journal and not expired (a row
    or a missing row of `classified` with an `expected_nr`): those before it are deleted or
    expired events', whose rows a delete, a truncate or an expiry lose for good (no repair can
    write them again). A pair left with no such event has no gap. A kept number's `previous` is
    the highest kept number before it in the pair's order (itself, for a second row of it), so
    that one window over the classified rows finds the runs: no distinct and no join, each a
    shuffle of its own.
    """
    pair = Window.partitionBy("tag", "persistence_id")
    ordered = pair.orderBy("tag_pid_sequence_nr").rowsBetween(Window.unboundedPreceding, -1)
    is_kept = F.col("kind").isin(*_KEPT)
    is_wanted = F.col("expected_nr").isNotNull() & ~F.col("expired")
    first = F.min(F.when(is_wanted, F.col("expected_nr"))).over(pair)
    previous = F.coalesce(
        F.max(F.when(is_kept, F.col("tag_pid_sequence_nr"))).over(ordered), F.lit(0)
    )
    start = F.greatest(F.col("previous") + 1, F.col("first"))
    return (
        classified.withColumn("first", first)
        .withColumn("previous", previous)
        .where(is_kept & F.col("first").isNotNull())
        .withColumn("start", start)
        .where(F.col("tag_pid_sequence_nr") > F.col("start"))
        .select(
            F.lit(ProblemKind.GAP.value).alias("kind"),
            "tag",
            "persistence_id",
            F.lit(None).cast("bigint").alias("sequence_nr"),
            F.col("start").alias("tag_pid_sequence_nr"),
            F.lit(None).cast("bigint").alias("expected_nr"),
            F.lit(None).cast("bigint").alias("timebucket"),
            F.lit(None).cast("bigint").alias("expected_bucket"),
            (F.col("tag_pid_sequence_nr") - F.col("start")).alias("count"),
        )
    )


def _report(classified: DataFrame, problems: DataFrame, sample_limit: int) -> VerifyReport:
    """Collect counts per kind, samples and affected pairs in one Spark job.

    One job lets Spark read each source once (identical exchanges are reused) instead of once
    per action.
    """
    per_kind = Window.partitionBy("kind").orderBy(
        "tag", "persistence_id", "sequence_nr", "tag_pid_sequence_nr"
    )
    no_number = F.lit(None).cast("bigint")
    counts = (
        classified.where(F.col("kind").isin(*_ROW_ONLY))
        .groupBy("kind")
        .count()
        .unionByName(problems.groupBy("kind").count())
        .select(F.lit("count").alias("record"), "kind", F.col("count").alias("n"))
    )
    samples = (
        problems.withColumn("rank", F.row_number().over(per_kind))
        .where(F.col("rank") <= sample_limit)
        .select(F.lit("sample").alias("record"), *_PROBLEM_COLUMNS, no_number.alias("n"))
    )
    affected = (
        problems.select("tag", "persistence_id")
        .distinct()
        .select(F.lit("affected").alias("record"), "tag", "persistence_id")
    )
    rows = (
        samples.unionByName(counts, allowMissingColumns=True)
        .unionByName(affected, allowMissingColumns=True)
        .collect()
    )
    totals = {row["kind"]: int(row["n"]) for row in rows if row["record"] == "count"}
    counts_by_kind = {kind: totals[kind.value] for kind in ProblemKind if totals.get(kind.value)}
    kept = ("ok", ProblemKind.MISNUMBERED.value, ProblemKind.WRONG_BUCKET.value)
    row_kinds = ("ok", "retained", *(k.value for k in ProblemKind if k in _ROW_KINDS))
    sampled = sorted(
        (_problem(row) for row in rows if row["record"] == "sample"),
        key=lambda p: (
            p.kind.value,
            p.tag,
            p.persistence_id,
            p.sequence_nr or 0,
            p.tag_pid_sequence_nr,
        ),
    )
    return VerifyReport(
        tagged_events=sum(totals.get(kind, 0) for kind in kept)
        + totals.get(ProblemKind.MISSING.value, 0),
        tag_view_rows=sum(totals.get(kind, 0) for kind in row_kinds),
        retained_rows=totals.get("retained", 0),
        counts=counts_by_kind,
        problems=tuple(sampled),
        affected=tuple(
            sorted(
                (Tag(row["tag"]), PersistenceId(row["persistence_id"]))
                for row in rows
                if row["record"] == "affected"
            )
        ),
        sample_limit=sample_limit,
    )


def _problem(row: Row) -> Problem:
    return Problem(
        kind=ProblemKind(row["kind"]),
        tag=Tag(row["tag"]),
        persistence_id=PersistenceId(row["persistence_id"]),
        sequence_nr=row["sequence_nr"],
        tag_pid_sequence_nr=int(row["tag_pid_sequence_nr"]),
        expected_tag_pid_sequence_nr=row["expected_nr"],
        time_bucket=row["timebucket"],
        expected_time_bucket=row["expected_bucket"],
        count=int(row["count"]),
    )
