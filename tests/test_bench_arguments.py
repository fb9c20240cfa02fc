"""The bench/ scripts refuse bad options on their command line, and run the size they are given.

A count of 0 was taken for "not given" (`args.events or DEFAULT`), so `--events 0` ran the
default workload, a million events in some scripts; `bench/cdc.py` checked nothing and failed
with a traceback after starting Spark; `bench/processor.py` waited ten minutes per figure for
events it had not written (`--events 0`, or a count that is not a multiple of its append
batch) and printed a traceback for an unknown `--policy`. The project's standard for bad input
on a command line: a one-line message naming the option, a non-zero exit, no traceback, and
nothing run. Each case here is refused before the script prints its machine header.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HANG_S = 240
"""Far more than a refusal (an import) or the small run below take; a hang fails the test."""

REFUSED = [
    ("acker.py", "--repeat", ["--quick", "--repeat", "0"]),
    ("append.py", "--events", ["--quick", "--backend", "sqlite", "--events", "0"]),
    ("append.py", "--single-events", ["--quick", "--backend", "sqlite", "--single-events", "-5"]),
    ("cdc.py", "--repeat", ["--writes", "600", "--keys", "60", "--rows", "2000", "--repeat", "0"]),
    ("cdc.py", "--keys", ["--writes", "600", "--keys", "-1", "--rows", "2000"]),
    ("processor.py", "--events", ["--backend", "sqlite", "--events", "0"]),
    ("processor.py", "--policy", ["--backend", "sqlite", "--events", "50", "--policy", "bogus"]),
    (
        "query.py",
        "--live-events",
        ["--backend", "sqlite", "--events", "1000", "--live-events", "0"],
    ),
    ("spark_source.py", "--latency-events", ["--events", "2000", "--latency-events", "0"]),
]


def run_bench(script: str, args: list[str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(ROOT / "bench" / script), *args]
    try:
        return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=HANG_S)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{script} {' '.join(args)} still ran after {HANG_S} s: {exc.stdout!r}")


@pytest.mark.parametrize(("script", "option", "args"), REFUSED)
def test_a_bad_option_is_refused_in_one_line(script: str, option: str, args: list[str]) -> None:
    result = run_bench(script, args)
    assert "Traceback" not in result.stderr
    assert result.returncode == 2, result.stdout[-2000:]
    assert result.stdout == ""
    assert result.stderr.splitlines()[-1].startswith(f"{script}: error: argument {option}: ")


def test_processor_runs_a_count_that_is_not_a_multiple_of_its_batch() -> None:
    """70 events: it appended 50 and waited for 70 in every figure, ten minutes each."""
    result = run_bench("processor.py", ["--backend", "sqlite", "--events", "70"])
    assert result.returncode == 0, result.stderr[-2000:]
    assert "workload:   70 events" in result.stdout
    assert result.stdout.count(" events/s\n") == 6
