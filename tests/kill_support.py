"""Crash tests' children: a Python script run until it kills itself with SIGKILL."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

KILL_WAIT_S = 600
"""How long a child may take to kill itself: a Spark driver starts Spark first, which took 70 to
80 s on a loaded machine (a child that hangs still fails the test, only later)."""


def run_until_killed(script: Path, *args: str) -> list[str]:
    """Run `script` with `args` until it kills itself; its stdout lines.

    Fails the test, showing the child's output, when it ended any other way, or when it has
    not ended after KILL_WAIT_S.
    """
    result = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=KILL_WAIT_S,
        check=False,
    )
    assert result.returncode == -signal.SIGKILL, (
        f"{script.name} exited with {result.returncode}\nstdout:\n{result.stdout}\n"
        f"stderr:\n{result.stderr}"
    )
    return result.stdout.splitlines()
