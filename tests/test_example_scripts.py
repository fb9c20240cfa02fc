"""The example's journal maker refuses bad input in one line, as `ordo` does.

examples/spark_pipelines/make_journal.py printed the traceback of ordo's error for a path that
can hold no journal or a first time bucket ordo refuses, and took a negative --events quietly.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

MAKE_JOURNAL = Path(__file__).resolve().parents[1] / "examples/spark_pipelines/make_journal.py"


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        (["{dir}"], "{dir}"),
        (["{dir}/journal.db", "--first-time-bucket", "garbage"], "garbage"),
        (["{dir}/journal.db", "--events", "-4"], "--events"),
    ],
)
def test_make_journal_refuses_bad_input_in_one_line(
    tmp_path: Path, arguments: list[str], named: str
) -> None:
    ran = subprocess.run(
        [sys.executable, str(MAKE_JOURNAL), *(a.format(dir=tmp_path) for a in arguments)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 2, ran.stderr
    assert "Traceback" not in ran.stderr
    assert ran.stdout == ""
    assert named.format(dir=tmp_path) in ran.stderr.splitlines()[-1]
    assert not (tmp_path / "journal.db").exists()
