"""How long an `ordo` command takes to start, against what it imported before, same run.

    .venv/bin/python bench/cli_start.py [--runs N] [--quick]

Every `ordo` command pays its imports before it does anything, and so does each process a
service manager or a script starts it in. pyarrow (with numpy) and rich are imported only by
the commands that use them (the Parquet change log; tables and progress bars), so the journal's
commands start without them. What is timed, each a fresh interpreter, best of N runs (default
10; --quick, a smoke run, 2):
- python: `python -c pass`, the interpreter's own start (the floor);
- import ordo.cli.main: what every command imports;
- the same plus pyarrow, numpy and rich: what every command imported before they were left to
  the commands that use them (the baseline);
- ordo --help, and ordo info on a new SQLite journal: whole commands.

A benchmark reports; it exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from _args import positive_count
from _report import Row, machine_lines, print_table

DEFAULT_RUNS = 10
QUICK_RUNS = 2
HEAVY = "pyarrow, numpy, rich.table, rich.progress"
"""The modules every command imported before (the baseline adds them to ordo.cli.main)."""


def best_seconds(command: Sequence[str], runs: int) -> float:
    """The shortest wall time of `runs` runs of `command` (each must exit 0)."""
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - started)
    return best


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=positive_count, default=None)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 runs each")
    args = parser.parse_args(argv)
    runs = args.runs or (QUICK_RUNS if args.quick else DEFAULT_RUNS)
    python, ordo = sys.executable, [sys.executable, "-m", "ordo"]
    with tempfile.TemporaryDirectory(prefix="ordo-bench-cli-") as folder:
        journal = f"sqlite:///{Path(folder) / 'journal.db'}"
        subprocess.run([*ordo, "init", "--journal", journal], check=True, stdout=subprocess.DEVNULL)
        floor = best_seconds([python, "-c", "pass"], runs)
        imports = best_seconds([python, "-c", "import ordo.cli.main"], runs)
        before = best_seconds([python, "-c", f"import ordo.cli.main, {HEAVY}"], runs)
        helped = best_seconds([*ordo, "--help"], runs)
        info = best_seconds([*ordo, "info", "--journal", journal], runs)
    for line in machine_lines():
        print(line)
    print()
    ms = f"ms, best of {runs}"
    print_table(
        [
            Row("python -c pass", f"{floor * 1000:.0f}", ms),
            Row("import ordo.cli.main", f"{imports * 1000:.0f}", ms),
            Row("  + pyarrow, numpy, rich (before)", f"{before * 1000:.0f}", ms),
            Row("ordo --help", f"{helped * 1000:.0f}", ms),
            Row("ordo info (SQLite)", f"{info * 1000:.0f}", ms),
            Row("saved per command", f"{(before - imports) * 1000:.0f}", "ms (before - now)"),
            Row("before / now (imports)", f"{before / imports:.2f}", "x (no target)"),
        ]
    )


if __name__ == "__main__":
    main()
