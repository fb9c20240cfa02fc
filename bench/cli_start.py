"""How long an `ordo` command takes to start, against what it imported before, same run.

    .venv/bin/python bench/cli_start.py [--runs N] [--spark-runs N] [--quick]
        [--archive-folder DIR] [--jvm-options=OPTIONS]

Every `ordo` command pays its imports before it does anything, and so does each process a
service manager or a script starts it in. pyarrow (with numpy) and rich are imported only by
the commands that use them (the Parquet change log; tables and progress bars), so the journal's
commands start without them. What is timed, each a fresh interpreter, best of N runs (default
10; --quick, a smoke run, 1):
- python: `python -c pass`, the interpreter's own start (the floor);
- import ordo.cli.root: what every command imports (the root group, which `ordo.cli.main`
  imports once it handles a stop; a command's own module is imported when it runs);
- the same plus ordo.cli.journal: what the journal's commands import before they open the
  journal;
- the same plus pyarrow, numpy and rich: what every command imported before they were left to
  the commands that use them (the baseline);
- ordo --help, and ordo info on a new SQLite journal: whole commands;
- ordo cdc ingest of a small file (INGESTED mutations of the simulated table, whose schema is
  registered first) into a new change log each run, its schemas in the SQLite journal: a whole
  command that publishes; and what importing pandas adds to pyarrow's import (`import pyarrow,
  pandas` less `import pyarrow`), which every such command paid before it built and read the
  change log's files without it;
- a Spark start and first small job (a process running start_session and a grouped count, as
  every command that runs Spark starts), without and with the class-data archive that
  `ordo spark archive` makes (made first, in a temporary folder, and timed), best of
  --spark-runs (default 5; --quick 1), the two alternating. Both run with --jvm-options as
  their SPARK_SUBMIT_OPTS, and the archive is made with them: by default none, as a user's
  shell has it (the caller's SPARK_SUBMIT_OPTS, such as the tests', is not passed on);
- a streaming job's start, the same way: `ordo cdc simulate` of 20 writes on 5 keys, a whole
  command whose Spark start runs the materializer's stream (the Parquet file source, its
  stateful step in RocksDB, foreachBatch) over some 60 deliveries, the classes the archive's
  warm-up stream loads; not in a --quick run (two more Spark starts, each with a stream: half a
  minute of the tests' smoke run).

--archive-folder DIR takes the archive from DIR (the folder `ordo spark archive` fills, or
another) instead of a temporary folder: made there, and timed, only when DIR has none for this
Java, Spark and JVM options; one found is used as it is and kept, and the table says it was not
made. That saves the archive's making, a start of Spark and a dump of its classes (half a
minute to a minute), in a run that wants only the starts: the tests' smoke run passes their own
archive's folder and options (tests/test_benches.py).

A benchmark reports; it exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from _args import positive_count
from _report import Row, machine_lines, print_table
from ordo.cdc import mutation_to_json
from ordo.errors import ClassArchiveError
from ordo.simulation.cdc import SIMULATED_SCHEMA, ReplicaWorkload, replica_mutations
from ordo.spark.class_archive import make_archive

DEFAULT_RUNS = 10
DEFAULT_SPARK_RUNS = 5
QUICK_RUNS = 1
QUICK_SPARK_RUNS = 1
"""A smoke run's Spark starts of each kind: the archive's making is most of its time anyway."""
HEAVY = "pyarrow, numpy, rich.table, rich.progress"
"""The modules every command imported before (the baseline adds them to ordo.cli.root)."""
INGESTED = 100
"""Mutations of the ingest figure's file: a small publish, whose start is most of its time."""


SPARK_JOB = """
import sys
from ordo.spark import start_session

spark = start_session(master="local[2]", app_name="ordo-bench-cli-start", output=sys.argv[1])
spark.range(1000).selectExpr("id % 7 AS k").groupBy("k").count().collect()
"""
"""A Spark start and a first small job, in a process of its own."""
STREAM_COMMAND = ("-m", "ordo", "cdc", "simulate", "--keys", "5", "--mutations", "20")
"""A streaming job's start: the materializer's, over the deliveries of 20 writes (its own sink)."""


def best_seconds(
    command: Sequence[str],
    runs: int,
    env: Mapping[str, str] | None = None,
    *,
    fresh: Path | None = None,
) -> float:
    """The shortest wall time of `runs` runs of `command` (each must exit 0).

    `fresh`, a folder the command fills, is removed before each run (untimed).
    """
    seconds = float("inf")
    for _ in range(runs):
        if fresh is not None:
            shutil.rmtree(fresh, ignore_errors=True)
        seconds = min(seconds, _seconds(command, env))
    return seconds


def ingest_command(folder: Path, journal: str) -> tuple[list[str], Path]:
    """`ordo cdc ingest` of a file of INGESTED mutations, their schema registered in `journal`;
    the change log it publishes to (under `folder`)."""
    schema, lines = folder / "readings.json", folder / "readings.jsonl"
    schema.write_text(SIMULATED_SCHEMA.to_json())
    mutations = replica_mutations(ReplicaWorkload(mutations=INGESTED, keys=10, replicas=1))
    lines.write_text("".join(json.dumps(mutation_to_json(m)) + "\n" for m in mutations))
    register = ["cdc", "schemas", "register", str(schema), "--journal", journal]
    subprocess.run([sys.executable, "-m", "ordo", *register], check=True, stdout=subprocess.DEVNULL)
    log = folder / "log"
    ingest = ["cdc", "ingest", str(lines), "--journal", journal, "--change-log", str(log)]
    return [sys.executable, "-m", "ordo", *ingest], log


def _seconds(command: Sequence[str], env: Mapping[str, str] | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - started


class SparkStarts(NamedTuple):
    """The Spark figures: the archive's making and size, starts without and with it."""

    making_s: float | None
    """None: the archive was found in --archive-folder, not made."""
    archive_bytes: int
    without_s: float
    with_s: float
    stream_without_s: float | None
    stream_with_s: float | None
    """None: no streaming command was timed (--quick)."""


def spark_starts(
    folder: Path,
    runs: int,
    *,
    archives: Path | None = None,
    jvm_options: str = "",
    streams: bool = True,
) -> SparkStarts:
    """Time starts without and with a class archive, alternating, `folder` their work folder.

    The archive is the one in `archives` (made there if missing), else one made in `folder`;
    `jvm_options` are the starts' SPARK_SUBMIT_OPTS and the archive's. The making's seconds
    are None when the archive was found, not made; the streaming command's when not `streams`.
    """
    env = {key: value for key, value in os.environ.items() if key != "SPARK_SUBMIT_OPTS"}
    if jvm_options:
        env["SPARK_SUBMIT_OPTS"] = jvm_options
    env["ORDO_SPARK_LOG"] = str(folder / "spark.log")
    started = time.perf_counter()
    archive = make_archive(
        folder=archives or folder / "archives", options=jvm_options, output=folder / "spark.log"
    )
    making = time.perf_counter() - started if archive.is_new else None
    job = [sys.executable, "-c", SPARK_JOB, str(folder / "spark.log")]
    stream = [sys.executable, *STREAM_COMMAND]
    off = {**env, "ORDO_SPARK_CLASS_ARCHIVE": "off"}
    mapped = {**env, "ORDO_SPARK_CLASS_ARCHIVE": str(archive.path.parent)}
    timed = [(job, "job"), (stream, "stream")] if streams else [(job, "job")]
    best: dict[tuple[str, str], float] = {}
    for _ in range(runs):
        for command, kind in timed:
            for environ, archived in ((off, "without"), (mapped, "with")):
                seconds = _seconds(command, environ)
                best[kind, archived] = min(best.get((kind, archived), seconds), seconds)
    return SparkStarts(
        making,
        archive.size_bytes,
        best["job", "without"],
        best["job", "with"],
        best.get(("stream", "without")),
        best.get(("stream", "with")),
    )


def making_row(seconds: float | None, archives: Path | None) -> Row:
    """The archive's making: its seconds, or that it was found in `archives` (not made)."""
    if seconds is None:
        return Row("making Spark's class archive", "-", f"not made: found in {archives}")
    return Row("making Spark's class archive", f"{seconds:.1f}", "s (ordo spark archive)")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=positive_count, default=None)
    parser.add_argument("--spark-runs", type=positive_count, default=None)
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 1 run each, 1 Spark start each"
    )
    parser.add_argument(
        "--archive-folder",
        type=Path,
        default=None,
        help="take Spark's class archive from this folder, made there only if missing "
        "(default: one made in a temporary folder)",
    )
    parser.add_argument(
        "--jvm-options",
        default="",
        help="the Spark starts' SPARK_SUBMIT_OPTS, the archive's too (default: none; "
        "written --jvm-options=..., as the options start with a dash)",
    )
    args = parser.parse_args(argv)
    runs = args.runs or (QUICK_RUNS if args.quick else DEFAULT_RUNS)
    spark_runs = args.spark_runs or (QUICK_SPARK_RUNS if args.quick else DEFAULT_SPARK_RUNS)
    python, ordo = sys.executable, [sys.executable, "-m", "ordo"]
    machine = machine_lines()  # its load line is the load at the start, before the runs
    with tempfile.TemporaryDirectory(prefix="ordo-bench-cli-") as folder:
        journal = f"sqlite:///{Path(folder) / 'journal.db'}"
        subprocess.run([*ordo, "init", "--journal", journal], check=True, stdout=subprocess.DEVNULL)
        floor = best_seconds([python, "-c", "pass"], runs)
        imports = best_seconds([python, "-c", "import ordo.cli.root"], runs)
        journal_s = best_seconds([python, "-c", "import ordo.cli.root, ordo.cli.journal"], runs)
        before = best_seconds([python, "-c", f"import ordo.cli.root, {HEAVY}"], runs)
        helped = best_seconds([*ordo, "--help"], runs)
        info = best_seconds([*ordo, "info", "--journal", journal], runs)
        ingest, log = ingest_command(Path(folder), journal)
        ingested = best_seconds(ingest, runs, fresh=log)
        arrow = best_seconds([python, "-c", "import pyarrow"], runs)
        pandas = best_seconds([python, "-c", "import pyarrow, pandas"], runs)
        try:
            spark = spark_starts(
                Path(folder),
                spark_runs,
                archives=args.archive_folder,
                jvm_options=args.jvm_options,
                streams=not args.quick,
            )
        except ClassArchiveError as exc:  # --jvm-options choosing sharing, a folder not writable
            parser.exit(1, f"{parser.prog}: error: {exc}\n")
    for line in machine:
        print(line)
    print()
    ms = f"ms, best of {runs}"
    runs_s = f"s, best of {spark_runs}"
    print_table(
        [
            Row("python -c pass", f"{floor * 1000:.0f}", ms),
            Row("import ordo.cli.root", f"{imports * 1000:.0f}", ms),
            Row("  + ordo.cli.journal (init, append, ...)", f"{journal_s * 1000:.0f}", ms),
            Row("  + pyarrow, numpy, rich (before)", f"{before * 1000:.0f}", ms),
            Row("ordo --help", f"{helped * 1000:.0f}", ms),
            Row("ordo info (SQLite)", f"{info * 1000:.0f}", ms),
            Row("saved per command", f"{(before - imports) * 1000:.0f}", "ms (before - now)"),
            Row("before / now (imports)", f"{before / imports:.2f}", "x (no target)"),
            Row(f"ordo cdc ingest ({INGESTED} mutations, SQLite)", f"{ingested * 1000:.0f}", ms),
            Row("  pandas's import (a publish's, before)", f"{(pandas - arrow) * 1000:.0f}", ms),
            making_row(spark.making_s, args.archive_folder),
            Row("  its size", f"{spark.archive_bytes / 1e6:.0f}", "MB"),
            Row("Spark start + first job", f"{spark.without_s:.1f}", runs_s),
            Row("  with the class archive", f"{spark.with_s:.1f}", runs_s),
            Row("  without / with", f"{spark.without_s / spark.with_s:.2f}", "x (no target)"),
            *stream_rows(spark, runs_s),
        ]
    )


def stream_rows(spark: SparkStarts, runs_s: str) -> list[Row]:
    """The streaming command's rows: without and with the archive, or that it was not run."""
    if spark.stream_without_s is None or spark.stream_with_s is None:
        return [Row("ordo cdc simulate, 20 writes", "-", "not run (--quick)")]
    return [
        Row("ordo cdc simulate, 20 writes", f"{spark.stream_without_s:.1f}", runs_s),
        Row("  with the class archive", f"{spark.stream_with_s:.1f}", runs_s),
        Row(
            "  without / with",
            f"{spark.stream_without_s / spark.stream_with_s:.2f}",
            "x (no target)",
        ),
    ]


if __name__ == "__main__":
    main()
