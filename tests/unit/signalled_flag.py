"""Signals at each step of a stop flag's wait or handling: the child process of test_signal_flag.py.

usage: python signalled_flag.py wait|receive

`wait`: Ctrl-C at each step of `SignalFlag.wait`, as when `run_interruptibly`'s main thread
waits for its work. `receive`: Ctrl-C, then SIGTERM at each step of the handling of Ctrl-C (a
service manager's stop after a user's). Each step in a `stop_flag()` of its own; the sweep ends
at the first step the signal did not reach (the code had fewer). Prints "step N" as each starts
(a hang leaves the last one), then the number of steps the signal reached.
"""

from __future__ import annotations

import signal
import sys
from itertools import count
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent))  # the tests' support modules

from interrupt_support import signalled_at_step
from ordo.interrupts import SignalFlag, Terminated, stop_flag

WAIT_S = 0.1
"""How long the flag is waited for: a wait the signal did not reach ends after it."""


STOPPED_BY: dict[int | None, type[KeyboardInterrupt]] = {
    signal.SIGINT: KeyboardInterrupt,
    signal.SIGTERM: Terminated,
}
"""What the flag's interrupt is, by the signal it took."""


def _signalled(step: int, within: str) -> bool:
    """One step of the sweep: whether the signal reached it; fails if the flag missed it."""
    with stop_flag() as flag:
        if within == "wait":
            with signalled_at_step(step, signal.SIGINT, within=SignalFlag.wait) as sent:
                flag.wait(WAIT_S)
        else:
            with signalled_at_step(step, signal.SIGTERM, within=SignalFlag.receive) as sent:
                signal.raise_signal(signal.SIGINT)
    if sent:  # Ctrl-C's number, or SIGTERM's if it landed before Ctrl-C's was noted
        assert flag.is_set(), f"step {step}"
        assert isinstance(flag.interrupt(), STOPPED_BY[flag.received]), f"step {step}"
    return bool(sent)


def main(within: str) -> None:
    for step in count(1):
        print(f"step {step}", flush=True)
        if not _signalled(step, within):
            print(step - 1)
            return


if __name__ == "__main__":
    main(sys.argv[1])
