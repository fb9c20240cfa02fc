"""What ordo's local file systems save a materializer's micro-batch on a local master.

    .venv/bin/python bench/local_files.py [--publishes N] [--repeat N] [--quick]

Hadoop's local file system, without its native library (pyspark ships none), starts a `chmod`
process for every file and folder it creates and a `readlink` for every rename through a
FileContext; a session that `start_session` starts on a local master writes its local files
through ordo's file systems instead (`ordo.spark.local_files`), which do both in Java. Two
materializers of one change log (bench/_change_log.py's `items` table: 8 partitions, N
publishes of one row a partition, default 50) in one local[2] session: one through the
session's file systems (ordo's), the other, the baseline, through a new session of the same
context whose Hadoop configuration names Hadoop's own (`fs.file.impl`,
`fs.AbstractFileSystem.file.impl`, and no FileSystem cache, which would hand out ordo's).
Both read the log first (untimed, and timed as "first run": a new checkpoint's batch). Then
each round publishes once more (8 files) and runs each materializer's `available_now` batch
from its checkpoint, the two in alternating order: the steady-state micro-batch of a running
materializer, with its checkpoint, RocksDB state store and sink writes. Figures are the median
and best of --repeat rounds (default 20; 2 with --quick, a smoke run, which also skips the
warm-up run before the first runs), and the baseline's /
ordo's. The materialized tables of the two are checked equal at the end. A benchmark reports;
it exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import SparkSession

from _args import positive_count
from _change_log import PARTITIONS, Materializer, make_log
from _report import Row
from _spark import report_on_spark
from ordo.cdc import Publisher
from ordo.spark.local_files import FILE_SYSTEMS
from ordo.storage.parquet import ParquetChangeLog

HADOOPS = {
    "fs.file.impl": "org.apache.hadoop.fs.LocalFileSystem",
    "fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.LocalFs",
    "fs.file.impl.disable.cache": "true",
}
"""A session's Hadoop settings for Hadoop's own local file systems (a session's settings go into
the Hadoop configuration of its jobs, checkpoints and state stores)."""
DEFAULT_SIZES = {"publishes": 50, "repeat": 20}
QUICK_SIZES = {"publishes": 4, "repeat": 2}
"""--quick's sizes; --publishes and --repeat win over either."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def hadoops_session(spark: SparkSession) -> SparkSession:
    """A new session of `spark`'s context whose local files go through Hadoop's file systems."""
    session = spark.newSession()
    for key, value in HADOOPS.items():
        session.conf.set(key, value)
    return session


def bench(
    spark: SparkSession, work: Path, *, publishes: int, repeat: int, warm_up: bool
) -> list[Row]:
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    if hadoop.get("fs.file.impl") != FILE_SYSTEMS["spark.hadoop.fs.file.impl"]:
        log("the session does not use ordo's local file systems: both figures are Hadoop's")
    root = work / "log"
    writes = make_log(root, publishes=publishes, rows=1, keys=PARTITIONS)
    publisher = Publisher(ParquetChangeLog(root / "log"), partitions=PARTITIONS)
    sessions = {"ordo": spark, "hadoop": hadoops_session(spark)}
    materializers = {name: Materializer(root, name) for name in sessions}
    if warm_up:
        log("materializers: a warm-up run")
        Materializer(root, "warm").run(spark)
    first = {name: materializers[name].run(session) for name, session in sessions.items()}
    rounds: dict[str, list[float]] = {name: [] for name in sessions}
    for round_nr in range(repeat):
        publisher.publish(writes.next_publish())
        order = list(sessions) if round_nr % 2 == 0 else list(reversed(sessions))
        for name in order:
            rounds[name].append(materializers[name].run(sessions[name]))
    if materializers["ordo"].table() != materializers["hadoop"].table():
        log("the two materialized tables differ")
        raise SystemExit(1)
    medians = {name: statistics.median(times) for name, times in rounds.items()}
    return [
        Row("change log", f"{publishes + repeat:,}", f"publishes of {PARTITIONS} files"),
        Row("first run, ordo's file systems", f"{first['ordo']:.2f}", "s (a new checkpoint)"),
        Row("first run, Hadoop's (baseline)", f"{first['hadoop']:.2f}", "s"),
        *(
            Row(
                f"one publish's batch, {label}",
                f"{medians[name]:.3f}",
                f"s median ({min(rounds[name]):.3f} best, {repeat} rounds)",
            )
            for name, label in (("ordo", "ordo's file systems"), ("hadoop", "Hadoop's (baseline)"))
        ),
        Row("Hadoop's / ordo's", f"{medians['hadoop'] / medians['ordo']:.2f}", "x (medians)"),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--publishes", type=positive_count, help="publishes before the rounds")
    parser.add_argument("--repeat", type=positive_count, help="rounds (micro-batches each)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: small sizes")
    args = parser.parse_args(argv)
    sizes = QUICK_SIZES if args.quick else DEFAULT_SIZES
    publishes = args.publishes or sizes["publishes"]
    repeat = args.repeat or sizes["repeat"]
    report_on_spark(
        "local-files",
        lambda spark, work: bench(
            spark, work, publishes=publishes, repeat=repeat, warm_up=not args.quick
        ),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
