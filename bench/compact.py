"""What `ordo cdc compact` buys a change log of many small files, and what it costs.

    .venv/bin/python bench/compact.py [--publishes N] [--rows N] [--keys N] [--repeat N] [--quick]

A long-lived capture publishes one file per partition at every flush. The log here is made the
same way: the real Publisher writes N publishes (default 500) into a ParquetChangeLog of 8
partitions, each publish R rows per partition (default 2, so one file per partition: 4,000
files of 8,000 rows), updates of K keys (default 2,000) of an `items` table whose schema is
registered in an SQLite sink. The log is copied (untimed) before anything reads it: the copy
stays as it is (before), the original is compacted (after), so each figure is measured on both
in the same run and the same Spark session (local[2], warmed by a materializer run and a batch
read on a small log; --quick, a smoke run, skips that), best of --repeat rounds (default 3; 1
with --quick) where it says so:

1. The compaction itself, once: `compact_table` with `ordo cdc compact`'s default --max-rows,
   on a log a materializer has read: files before and after, wall seconds, rows/s, files/s.
2. A Spark batch read of the whole log, `spark.read.schema(CHANGE_LOG_DDL).parquet(log).count()`:
   listing the files and opening each is the cost.
3. A materializer's first run (`ordo.spark.materialize`, `available_now`, SQLite sink) over the
   whole log, from a new checkpoint: before, the better of two (two checkpoints read the
   uncompacted log, one for each copy); after, one run on the compacted log.
4. The steady-state micro-batch of a materializer: one `available_now` run that picks up one new
   publish (8 files, one a partition) on top of the log, with a checkpoint that has read the
   rest. Before: the checkpoint that read the uncompacted log. After, two checkpoints: the one
   that read the log before its compaction and then the merged files (a materializer that lived
   through the compaction: its file source still remembers every file it ever listed; it reads
   the merged files once, untimed, before the rounds, except with --quick, whose one round then
   reads them too), and the one of figure 3, started after the compaction. Each round publishes
   the same rows into both logs, then times the three runs and the two batch reads. The
   materialized tables of both logs are checked equal at the end, and the batch reads' row
   counts at every round.

Ratios are before / after (how many times less time the compacted log takes). A benchmark
reports; it exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import SparkSession

from _args import positive_count
from _change_log import ITEMS, PARTITIONS, Materializer, make_log
from _report import Row
from _spark import report_on_spark
from ordo.cdc import Publisher
from ordo.cli.cdc_compact import DEFAULT_MAX_ROWS
from ordo.spark.change_schemas import CHANGE_LOG_DDL
from ordo.storage.parquet import ParquetChangeLog
from ordo.storage.parquet.compaction import compact_table

DEFAULT_SIZES = {"publishes": 500, "rows": 2, "keys": 2_000, "repeat": 3}
QUICK_SIZES = {"publishes": 8, "rows": 1, "keys": 64, "repeat": 1}
"""--quick's sizes; --publishes, --rows, --keys and --repeat win over either."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def batch_read_seconds(spark: SparkSession, root: Path) -> tuple[int, float]:
    """A Spark batch count of the whole table log under `root`: its rows and wall seconds."""
    started = time.perf_counter()
    rows = spark.read.schema(CHANGE_LOG_DDL).parquet(str(root / "log" / ITEMS.table)).count()
    return rows, time.perf_counter() - started


def warm_up(spark: SparkSession, work: Path) -> None:
    """A materializer run and a batch read on a small log, untimed: Spark's first jobs (JVM
    code paths, Python workers) would otherwise count in the first (before) figures."""
    log("warm-up")
    root = work / "warm"
    make_log(root, publishes=4, rows=1, keys=PARTITIONS)
    Materializer(root, "warm").run(spark)
    batch_read_seconds(spark, root)


def file_count(root: Path) -> int:
    """The files of the table's log under `root`."""
    return len(ParquetChangeLog(root / "log").files(ITEMS.table))


class Best:
    """The shortest time of each figure over the rounds."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def keep(self, figure: str, seconds: float) -> None:
        self.seconds[figure] = min(seconds, self.seconds.get(figure, seconds))

    def __getitem__(self, figure: str) -> float:
        return self.seconds[figure]

    def shown(self) -> str:
        """The figures so far, for the round's line on stderr."""
        return ", ".join(f"{figure} {s:.2f} s" for figure, s in self.seconds.items())


def bench(
    spark: SparkSession,
    work: Path,
    *,
    publishes: int,
    rows: int,
    keys: int,
    repeat: int,
    is_lived_settled: bool = True,
) -> list[Row]:
    """Make the log and its copy, compact the original, and time both (see the module).

    With `is_lived_settled`, the materializer that lived through the compaction reads the
    merged files, untimed, before the rounds (a --quick run does not: one Spark query less).
    """
    before, after = work / "before", work / "after"
    log(f"change log: {publishes:,} publishes of {rows} row(s) in each of {PARTITIONS} partitions")
    writes = make_log(after, publishes=publishes, rows=rows, keys=keys)
    shutil.copytree(after, before)
    old, lived, fresh = (
        Materializer(before, "old"),
        Materializer(after, "lived"),
        Materializer(after, "fresh"),
    )
    best = Best()
    log("materializers: reading the whole log")
    for materializer in (old, lived):  # the same log: the first run pays Spark's first jobs
        best.keep("first run before", materializer.run(spark))
    log("compacting")
    started = time.perf_counter()
    receipt = compact_table(ParquetChangeLog(after / "log"), ITEMS.table, max_rows=DEFAULT_MAX_ROWS)
    compact_s = time.perf_counter() - started
    log("materializers: reading the compacted log")
    if is_lived_settled:
        lived.run(spark)  # untimed: the merged files are new to it
    best.keep("first run after", fresh.run(spark))
    for round_nr in range(repeat):
        mutations = writes.next_publish()
        for root in (before, after):
            Publisher(ParquetChangeLog(root / "log"), partitions=PARTITIONS).publish(mutations)
        turn = round_nr % 3  # each goes first in turn: Spark's later runs tend to be quicker
        for materializer in (old, lived, fresh)[turn:] + (old, lived, fresh)[:turn]:
            best.keep(materializer.name, materializer.run(spark))
        roots = (before, after) if round_nr % 2 == 0 else (after, before)
        counted = {root: batch_read_seconds(spark, root) for root in roots}
        if counted[before][0] != counted[after][0]:
            msg = f"the logs hold {counted[before][0]} and {counted[after][0]} rows"
            raise RuntimeError(msg)
        best.keep("read before", counted[before][1])
        best.keep("read after", counted[after][1])
        log(f"  round {round_nr + 1}: {best.shown()}")
    if not old.table() == lived.table() == fresh.table():
        msg = "the materialized tables of the log and of its compacted copy differ"
        raise RuntimeError(msg)
    files = f"{file_count(before):,} / {file_count(after):,} files"
    return [
        Row(
            "change log",
            f"{receipt.files_before:,} / {receipt.rows:,}",
            f"files / rows ({PARTITIONS} partitions, {keys:,} keys)",
        ),
        Row(
            "compaction: files after",
            f"{receipt.files_after:,}",
            f"files (--max-rows {DEFAULT_MAX_ROWS:,})",
        ),
        Row("compaction: wall time", f"{compact_s:.2f}", "s (one run)"),
        Row("compaction: rows/s", f"{receipt.rows / compact_s:,.0f}", "rows/s"),
        Row("compaction: files/s", f"{receipt.files_before / compact_s:,.0f}", "files/s (listed)"),
        *ratio_rows(
            "batch read (count)",
            best["read before"],
            best["read after"],
            f"{files}, best of {repeat}",
        ),
        *ratio_rows(
            "materializer, first run",
            best["first run before"],
            best["first run after"],
            "whole log; best of 2 / 1 run",
        ),
        *ratio_rows(
            "materializer, one new publish",
            best["old"],
            best["lived"],
            f"after: the checkpoint of before; best of {repeat}",
        ),
        *ratio_rows(
            "the same, new checkpoint",
            best["old"],
            best["fresh"],
            f"after: a checkpoint started after compacting; best of {repeat}",
        ),
    ]


def ratio_rows(figure: str, before_s: float, after_s: float, note: str) -> list[Row]:
    """The figure's seconds before and after compaction, and their ratio."""
    return [
        Row(f"{figure}: before / after", f"{before_s:.2f} / {after_s:.2f}", f"s ({note})"),
        Row("  ratio", f"{before_s / after_s:.2f}", "x (no target)"),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--publishes", type=positive_count, default=None, help="publishes making the log"
    )
    parser.add_argument(
        "--rows", type=positive_count, default=None, help="rows in each partition per publish"
    )
    parser.add_argument("--keys", type=positive_count, default=None, help="keys updated")
    parser.add_argument(
        "--repeat", type=positive_count, default=None, help="timed runs; the best is reported"
    )
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    args = parser.parse_args(argv)
    sizes = QUICK_SIZES if args.quick else DEFAULT_SIZES
    publishes, rows, keys, repeat = (
        getattr(args, name) or sizes[name] for name in ("publishes", "rows", "keys", "repeat")
    )

    def measure(spark: SparkSession, work: Path) -> list[Row]:
        if not args.quick:
            warm_up(spark, work)
        return bench(
            spark,
            work,
            publishes=publishes,
            rows=rows,
            keys=keys,
            repeat=repeat,
            is_lived_settled=not args.quick,
        )

    report_on_spark("compact", measure)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
