"""A stop flag (`ordo.interrupts.stop_flag`) that signals reach at each step of its own code.

In a child process (signalled_flag.py): signals are handled on a process's main thread only,
and a hang must fail the test, not stop the run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("signalled_flag.py")
GUARD_S = 20
"""Far longer than a sweep takes: only turns a hang into a failure."""


def _sweep(within: str) -> int:
    """Run the child's sweep over `within`; how many steps the signal reached."""
    try:
        done = subprocess.run(
            [sys.executable, str(CHILD), within],
            capture_output=True,
            text=True,
            timeout=GUARD_S,
            check=False,
        )
    except subprocess.TimeoutExpired as hung:
        steps = hung.stdout.decode() if isinstance(hung.stdout, bytes) else hung.stdout or ""
        pytest.fail(f"the signalled process hung after {GUARD_S} s at: {steps.splitlines()[-1:]}")
    assert done.returncode == 0, done.stderr
    return int(done.stdout.splitlines()[-1])


def test_a_ctrl_c_at_any_step_of_a_wait_for_the_flag_sets_it() -> None:
    """The flag was a threading.Event: a Ctrl-C whose handler ran while the waiting thread held
    the Event's lock (between entering the wait and the wait proper) waited in set() for that
    lock for ever, and `run_interruptibly` (an `ordo cdc ingest`, a Spark command's start) hung
    until it was killed."""
    assert _sweep("wait") > 1


def test_a_sigterm_at_any_step_of_a_ctrl_c_s_handling_leaves_the_flag_set() -> None:
    """A service manager's SIGTERM right after a user's Ctrl-C ran its handler wherever the
    first one was: inside the Event's set(), holding its lock, so the second set() waited for it
    for ever (an `ordo append` hung with its writer lease, the simulation's writers did until
    their parent killed them)."""
    assert _sweep("receive") > 1
