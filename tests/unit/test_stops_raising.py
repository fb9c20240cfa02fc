"""A stop raised into a `stops_raising` block (`ordo.interrupts`): no Ctrl-C within, the
signal's interrupt out of it."""

from __future__ import annotations

import os
import signal
import time

import pytest

from ordo.interrupts import Terminated, stop_flag, stops_raising


@pytest.mark.parametrize(
    ("number", "interrupt"),
    [(signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, Terminated)],
    ids=["ctrl-c", "sigterm"],
)
def test_a_stop_within_the_block_is_taken_for_no_ctrl_c_and_leaves_it_as_the_signals(
    number: signal.Signals, interrupt: type[KeyboardInterrupt]
) -> None:
    """psycopg answers a KeyboardInterrupt in a statement's wait by cancelling the statement and
    waiting for its end, 5 s each: a capture stopped while its new session asked a server that
    stopped answering for its lock ended 10 s later, for a session it closes unused."""
    taken_for_ctrl_c: list[KeyboardInterrupt] = []
    with pytest.raises(interrupt) as raised, stop_flag(), stops_raising():
        _signalled(number, taken_for_ctrl_c)
    assert taken_for_ctrl_c == []
    assert type(raised.value) is interrupt


def _signalled(number: signal.Signals, taken_for_ctrl_c: list[KeyboardInterrupt]) -> None:
    """Send this process `number`, noting a KeyboardInterrupt it raises in `taken_for_ctrl_c`."""
    try:
        os.kill(os.getpid(), number)
        time.sleep(5)  # the handler raises in here: the sleep never ends
    except KeyboardInterrupt as exc:
        taken_for_ctrl_c.append(exc)
        raise
