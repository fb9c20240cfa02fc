"""Every bench/ script runs to its table at a small size.

The benchmarks are part of what each issue delivers, and only mypy read them: two of them
(`bench/cdc.py`, `bench/query.py`) failed before printing anything for several sessions, after
opening an SQLite database stopped creating its folder and a query stopped creating its
journal. This runs each at a small size, all at once (they wait on Spark, PostgreSQL and
sleeps more than on the CPU), and asserts that it exits 0 having printed its table, under a
header that names the PostgreSQL version when the script runs on PostgreSQL (`bench/processor.py`
named none); the figures themselves are not checked (speed is the benchmarks' business, not
the tests').
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from spark_classes_support import FOLDER, JVM_OPTIONS

ROOT = Path(__file__).resolve().parents[1]
BENCHES = {
    "acker.py": ["--quick"],
    "append.py": ["--quick", "--events", "500", "--single-events", "50"],
    "cli_start.py": ["--quick", "--archive-folder", str(FOLDER), f"--jvm-options={JVM_OPTIONS}"],
    "cdc.py": ["--quick", "--writes", "600", "--keys", "60", "--rows", "2000"],
    "compact.py": ["--quick"],
    "local_files.py": ["--quick"],
    "processor.py": ["--quick"],
    "query.py": ["--quick", "--events", "1000", "--live-events", "3"],
    "rebuild.py": ["--quick", "--events", "2000"],
    "spark_source.py": ["--quick", "--events", "2000", "--latency-events", "5"],
}
"""The arguments of each: small sizes. bench/cli_start.py takes the run's own Spark class archive
(the one conftest.py makes or finds for the tests' JVM options; a caller whose SPARK_SUBMIT_OPTS
replaced those gets one made there once, by the first run) rather than make one in a temporary
folder, a whole start and dump of Spark that was half of this test's time."""
TABLE_HEADER = re.compile(r"^figure +value +unit$", re.MULTILINE)
TABLE_ROW = re.compile(r"^-+ +-+ +-+\n\S", re.MULTILINE)
"""The rule under the header, then a first figure."""
POSTGRES_HEADER = re.compile(r"^postgresql: \d", re.MULTILINE)
"""The header line naming the server's version (`machine_lines`), as `SHOW server_version`."""


def _runs_postgres(name: str) -> bool:
    """Whether the bench script starts the benchmarks' PostgreSQL (it does at their defaults)."""
    return "bench_postgres" in (ROOT / "bench" / name).read_text()


def test_every_bench_script_is_run_here() -> None:
    scripts = {p.name for p in (ROOT / "bench").glob("*.py") if not p.name.startswith("_")}
    assert scripts == set(BENCHES)


@pytest.mark.timeout(900)
def test_every_bench_prints_its_table(tmp_path: Path) -> None:
    running = {}
    for name, args in BENCHES.items():
        output = (tmp_path / f"{name}.log").open("w")
        command = [sys.executable, str(ROOT / "bench" / name), *args]
        process = subprocess.Popen(command, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT)
        running[name] = (process, output)
    failed = []
    for name, (process, output) in running.items():
        try:
            code = process.wait(timeout=840)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
        output.close()
        text = (tmp_path / f"{name}.log").read_text()
        if code != 0 or not TABLE_HEADER.search(text) or not TABLE_ROW.search(text):
            failed.append(f"{name} exited {code}; its output ends:\n{text[-3000:]}")
        elif _runs_postgres(name) and not POSTGRES_HEADER.search(text):
            failed.append(f"{name}'s header names no PostgreSQL version:\n{text[:1000]}")
    assert not failed, "\n\n".join(failed)
