"""Rebuilding every tag view: the Spark job against a single-process Python loop, same run.

    .venv/bin/python bench/rebuild.py [--events N] [--partitions P] [--verify] [--quick]

One SQLite journal in a temp dir gets N events (default 1,000,000) of one tag ("order"),
~100-byte JSON payloads, over 1000 persistence ids, appended with Journal.append() in batches
of 1000 events; the tag writers' rows are kept as the reference (a digest of every row key).
Spark runs locally (`ordo.spark.start_session(master="local[2]")`).

What is timed (each figure = one rebuild of all N events from the journal into empty tag
views; events/s = N / wall time):
- python loop: Reconciliation.rebuild_all_locally(): persistence id by id, read the events,
  number and bucket them in Python, upsert 10,000 rows per transaction.
- spark: ordo.spark.rebuild.rebuild_all() with P partitions (default 2): journal keys read by
  the `ordo_journal_keys` source, numbers by row_number() over (persistence_id, tag), buckets,
  and upserts from mapInArrow, one transaction per Arrow batch (10,000 rows).
Before each figure the tag views are truncated (untimed). Both rebuilds run once, untimed, on
a 5,000-event journal first (Spark's JVM and Python workers warm; --quick, a smoke run whose
figures then include Spark's first jobs, skips this). After each figure the rows
are compared with the tag writers' (count and key digest): the table says whether they equal.
With --verify, `ordo verify`'s Spark job is timed on the rebuilt journal too: warm (in this
process, after the rebuilds) and cold (a fresh `python -m ordo verify` process once this
process's Spark has stopped: Spark's start, its first jobs and the command's own imports, as a
user running the command sees it; the wall time of the process).

A benchmark reports; it exits 0 whether the rebuilds are fast or not.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import closing
from pathlib import Path

from pyspark.sql import SparkSession

from _args import positive_count
from _report import Row, machine_lines, print_table
from _workload import PERSISTENCE_IDS, payload, payload_bytes, persistence_id
from ordo import EventsByTagSettings, NewEvent, open_journal
from ordo.settings import OperationsSettings
from ordo.spark import start_session
from ordo.spark.rebuild import rebuild_all
from ordo.spark.verify import verify_tag_views
from ordo.storage.open import stores_at
from ordo.storage.rows import TAG_VIEW_KEY_COLUMNS
from ordo.tools.reconciliation import Reconciliation

TAG = "order"
APPEND_BATCH = 1000
DEFAULT_EVENTS = 1_000_000
WARM_UP_EVENTS = 5_000
ROWS_PER_BATCH = 10_000


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def populate(url: str, *, events: int) -> float:
    """Append the events, APPEND_BATCH per append(), round-robin over the persistence ids."""
    settings = EventsByTagSettings(max_message_batch_size=APPEND_BATCH)
    began = time.perf_counter()
    with open_journal(url, settings=settings) as journal:
        for k, start in enumerate(range(0, events, APPEND_BATCH)):
            batch = [
                NewEvent.of(payload(i), tags=(TAG,))
                for i in range(start, min(start + APPEND_BATCH, events))
            ]
            journal.append(persistence_id(k), batch)
    return time.perf_counter() - began


def digest(db: Path) -> tuple[int, str]:
    """How many rows tag_views has and a digest of their keys in key order."""
    sha = hashlib.sha256()
    count = 0
    with closing(sqlite3.connect(db)) as conn:
        cursor = conn.execute(
            f"SELECT {TAG_VIEW_KEY_COLUMNS}, payload FROM tag_views ORDER BY {TAG_VIEW_KEY_COLUMNS}"
        )
        while rows := cursor.fetchmany(10_000):
            count += len(rows)
            for row in rows:
                sha.update(repr(row).encode())
    return count, sha.hexdigest()[:16]


def truncate(url: str) -> None:
    with stores_at(url) as stores:
        Reconciliation.of(stores).truncate()


def python_loop(url: str) -> float:
    truncate(url)
    began = time.perf_counter()
    with stores_at(url) as stores:
        settings = OperationsSettings(rows_per_batch=ROWS_PER_BATCH)
        Reconciliation.of(stores, settings=settings).rebuild_all_locally()
    return time.perf_counter() - began


def spark_job(spark: object, url: str, partitions: int) -> float:
    truncate(url)
    began = time.perf_counter()
    rebuild_all(spark, url, partitions=partitions)  # type: ignore[arg-type]
    return time.perf_counter() - began


def timed(
    name: str, run: Callable[[], float], db: Path, reference: tuple[int, str]
) -> tuple[float, bool]:
    log(f"{name} ...")
    seconds = run()
    is_equal = digest(db) == reference
    log(f"{name}: {seconds:.1f} s, rows equal the tag writers': {is_equal}")
    return seconds, is_equal


def warm_up(spark: SparkSession, db: Path, partitions: int) -> None:
    """Both rebuilds once, untimed, on a WARM_UP_EVENTS journal at `db`.

    Spark's first job (JVM code paths, Python workers) would otherwise count in its figure; a
    --quick run skips this (its figures are not the point).
    """
    url = f"sqlite:///{db}"
    populate(url, events=WARM_UP_EVENTS)
    log("warm-up (untimed) ...")
    python_loop(url)
    spark_job(spark, url, partitions)


def cold_verify(url: str, partitions: int) -> tuple[float, bool]:
    """The wall time of a fresh `ordo verify` process on `url`, and whether it found it clean.

    It runs this interpreter (the one with ordo), its Spark output in a file of the journal's
    folder; the environment is this process's (SPARK_SUBMIT_OPTS included).
    """
    command = [sys.executable, "-m", "ordo", "verify", "--journal", url]
    command += ["--partitions", str(partitions)]
    log_file = Path(url.removeprefix("sqlite:///")).with_suffix(".verify.log")
    environ = {**os.environ, "ORDO_SPARK_LOG": str(log_file)}
    began = time.perf_counter()
    done = subprocess.run(command, env=environ, capture_output=True, check=False)
    return time.perf_counter() - began, done.returncode == 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--events", type=positive_count, default=DEFAULT_EVENTS, help="journal size"
    )
    parser.add_argument(
        "--partitions", type=positive_count, default=2, help="Spark read partitions"
    )
    parser.add_argument("--verify", action="store_true", help="also time `ordo verify`")
    parser.add_argument("--quick", action="store_true", help="a smoke run: no warm-up")
    args = parser.parse_args(argv)
    events = args.events
    print("\n".join(machine_lines(libraries=("ordo", "pyspark", "pyarrow"))))
    print(
        f"workload:   {events:,} events, one tag ({TAG!r}), {PERSISTENCE_IDS} persistence ids,"
        f" {APPEND_BATCH} events per append, {len(payload_bytes(0))}-byte JSON payload; SQLite"
    )
    print(
        f"rebuild:    into truncated tag views; {ROWS_PER_BATCH:,} rows per upsert; spark "
        f"local[2], {args.partitions} read partitions; events/s = N / wall time"
    )
    print(flush=True)
    with tempfile.TemporaryDirectory(prefix="ordo-bench-rebuild-") as root:
        db = Path(root) / "journal.db"
        url = f"sqlite:///{db}"
        log(f"populating {events:,} events ...")
        populate_s = populate(url, events=events)
        reference = digest(db)
        log("starting spark ...")
        spark = start_session(master="local[2]", app_name="ordo-bench-rebuild")
        try:
            if not args.quick:
                warm_up(spark, Path(root) / "warm-up.db", args.partitions)
            local_s, local_ok = timed("python loop", lambda: python_loop(url), db, reference)
            spark_s, spark_ok = timed(
                "spark", lambda: spark_job(spark, url, args.partitions), db, reference
            )
            rows = [
                Row("append (Journal.append, setup)", f"{events / populate_s:,.0f}", "events/s"),
                Row("rebuild: python loop (1 process)", f"{events / local_s:,.0f}", "events/s"),
                Row(
                    f"rebuild: spark ({args.partitions} partitions)",
                    f"{events / spark_s:,.0f}",
                    "events/s",
                ),
                Row("spark / python loop", f"{local_s / spark_s:.2f}", "x"),
                Row("python loop rows == tag writer's", "yes" if local_ok else "NO", ""),
                Row("spark rows == tag writer's", "yes" if spark_ok else "NO", ""),
            ]
            if args.verify:
                log("verify ...")
                began = time.perf_counter()
                report = verify_tag_views(spark, url, partitions=args.partitions)
                verify_s = time.perf_counter() - began
                rows.append(Row("verify (spark)", f"{events / verify_s:,.0f}", "events/s"))
                rows.append(Row("verify finds the views clean", str(report.is_clean), ""))
        finally:
            spark.stop()
        if args.verify:
            log("verify, a fresh `ordo verify` process ...")
            cold_s, is_clean = cold_verify(url, args.partitions)
            rows.append(Row("verify (spark, warm, in process)", f"{verify_s:.1f}", "s"))
            rows.append(Row("verify (cold: `ordo verify` process)", f"{cold_s:.1f}", "s"))
            rows.append(Row("`ordo verify` finds the views clean", str(is_clean), ""))
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
