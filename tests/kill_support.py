"""Crash tests' children: a Python script run until it kills itself with SIGKILL."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path


def run_until_killed(script: Path, *args: str) -> list[str]:
    """Run `script` with `args` until it kills itself; its stdout lines.

    Fails the test, showing the child's output, when it ended any other way.
    """
    result = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == -signal.SIGKILL, (
        f"{script.name} exited with {result.returncode}\nstdout:\n{result.stdout}\n"
        f"stderr:\n{result.stderr}"
    )
    return result.stdout.splitlines()
