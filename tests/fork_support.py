"""Running a call in a child made by os.fork, as multiprocessing's default start method does, and
checking that the child was refused."""

from __future__ import annotations

import multiprocessing
import os
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection


@dataclass(frozen=True, slots=True)
class ChildOutcome:
    """What the call did in the child: returned `value`, or raised `error` (its type's name)."""

    value: object = None
    error: str | None = None
    message: str = ""


def in_forked_child(call: Callable[[], object]) -> ChildOutcome:
    """Run `call` in a forked child and tell what it returned (picklable) or raised.

    Python warns that forking a process with threads may deadlock the child (a DeprecationWarning
    from 3.12, an error under the suite's filterwarnings): that hazard is what these tests are
    about, so the warning is ignored here only.
    """
    context = multiprocessing.get_context("fork")
    receiving, sending = context.Pipe(duplex=False)
    child = context.Process(target=_run, args=(call, sending))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r".*fork\(\) may lead to deadlocks", DeprecationWarning)
        child.start()
    sending.close()  # this process's copy: a child that dies without sending is EOFError
    try:
        outcome: ChildOutcome = receiving.recv()
    finally:
        receiving.close()
        child.join()
    return outcome


def assert_refused(outcome: ChildOutcome, what: str) -> None:
    """The child was refused with ForkedProcessError naming `what` (a pattern) and this process."""
    assert outcome.error == "ForkedProcessError", outcome
    assert re.fullmatch(
        rf"{what} was opened in process {os.getpid()} and cannot be used in process \d+ "
        r"\(a forked child\): open a new one in each process",
        outcome.message,
    ), outcome.message


def _run(call: Callable[[], object], sending: Connection) -> None:
    try:
        outcome = ChildOutcome(value=call())
    except Exception as exc:
        outcome = ChildOutcome(error=type(exc).__name__, message=str(exc))
    sending.send(outcome)
