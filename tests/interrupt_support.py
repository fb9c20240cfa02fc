"""Ctrl-C or SIGTERM at each point where a signal's handler could run, deterministically.

Python runs a signal's handler after any call into C returns (its KeyboardInterrupt, or ordo's
`Terminated`, raised right there). A profile function that raises at the n-th such return, for
every n, puts that interrupt at each point where a signal's could land, as `sys.setprofile`
reports C calls on the thread that sets it (not on the threads the block starts). A handler
also runs between two bytecodes of Python code that calls nothing in C (`signalled_at_step`):
a lock's owner between the lines that took and release it.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from types import CodeType, FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed import ProfileFunction, TraceFunction


def interrupted_after(calls: int, *, sparing: str = "") -> AbstractContextManager[None]:
    """KeyboardInterrupt as the `calls`-th C call of this thread in the block returns.

    C calls made within the package `sparing` (its functions and all they call) are not
    counted: a library's own window, which no caller can close, is left out of a test of the
    caller's.
    """

    def interrupt(returned: int) -> None:
        if returned == calls:
            raise KeyboardInterrupt  # the profile function is unset with it

    return _counting_c_calls(interrupt, sparing=sparing)


@contextmanager
def c_calls(*, sparing: str = "") -> Iterator[list[int]]:
    """How many C calls of this thread the block makes, counted as `interrupted_after` counts.

    Yields a one-item list that holds the count once the block is done: the points an
    `interrupted_after` sweep of work too long to try at every call picks among.
    """
    counted = [0]

    def count(returned: int) -> None:
        counted[0] = returned

    with _counting_c_calls(count, sparing=sparing):
        yield counted


@contextmanager
def _counting_c_calls(at_each: Callable[[int], None], *, sparing: str) -> Iterator[None]:
    """`at_each(n)` as the n-th C call of this thread in the block returns, `sparing` left out."""
    returned = 0

    def profile(frame: FrameType, event: str, _arg: object) -> None:
        nonlocal returned
        if event == "c_return" and not (sparing and _within(frame, sparing)):
            returned += 1
            at_each(returned)

    with _profiling(profile):
        yield


@contextmanager
def signalled_after(
    calls: int, number: signal.Signals, *, within: Callable[..., object]
) -> Iterator[None]:
    """Signal `number` (for real) as the `calls`-th C call of this thread within `within` returns.

    Python runs the handler installed for `number` right there. The default handlers raise
    (KeyboardInterrupt, or a command's `Terminated`; SIGTERM's default action ends the process);
    a command that takes the signal as a flag (`ordo.interrupts.stop_flag`) sets it and goes on.
    Only the C calls made while `within` (a Python function) runs are counted, so that a loop
    over `calls` puts the signal at each point of that work, not of all a command does.
    """
    code = _code(within)
    returned = running = 0
    signalled = False

    def profile(frame: FrameType, event: str, _arg: object) -> None:
        nonlocal returned, running, signalled
        if signalled:
            return
        if frame.f_code is code and event in ("call", "return"):
            running += 1 if event == "call" else -1
        elif running and event == "c_return":
            returned += 1
            if returned == calls:
                signalled = True
                signal.raise_signal(number)  # what its handler raises unsets the profile function

    with _profiling(profile):
        yield


@contextmanager
def signalled_at_step(
    step: int, number: signal.Signals, *, within: Callable[..., object]
) -> Iterator[list[signal.Signals]]:
    """Signal `number` (for real) before the `step`-th bytecode run within `within` executes.

    The bytecodes counted are those of `within` (a Python function) and of the Python code it
    calls, on this thread; a signal's handler the block runs is not counted (tracing is off
    while the trace function signals), so a loop over `step` puts a second signal at each point
    of a first one's handling. Python checks for signals at fewer points than every bytecode:
    this puts a signal at each one and more. Yields a list that gets `number` once it was sent:
    still empty after the block, `within` ran fewer than `step` bytecodes.
    """
    code = _code(within)
    sent: list[signal.Signals] = []
    running = ran = 0

    def trace(frame: FrameType, event: str, _arg: object) -> TraceFunction | None:
        nonlocal running, ran
        if sent:
            return None
        if event == "call":
            if frame.f_code is not code and not running:
                return None
            running += frame.f_code is code
            frame.f_trace_opcodes = True
        elif event == "return":
            running -= frame.f_code is code
        elif event == "opcode":
            ran += 1
            if ran == step:
                sent.append(number)
                signal.raise_signal(number)  # what its handler raises unsets the trace
        return trace

    sys.settrace(trace)
    try:
        yield sent
    finally:
        sys.settrace(None)


def _code(function: Callable[..., object]) -> CodeType:
    """The code of `function`, a Python function (a builtin has none to count in)."""
    code = getattr(function, "__code__", None)
    if not isinstance(code, CodeType):
        msg = f"{function!r} is no Python function"
        raise TypeError(msg)
    return code


def _within(frame: FrameType | None, package: str) -> bool:
    """Whether `frame` or one of its callers runs code of `package`."""
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if module == package or module.startswith(f"{package}."):
            return True
        frame = frame.f_back
    return False


@contextmanager
def _profiling(profile: ProfileFunction) -> Iterator[None]:
    """`profile` is this thread's profile function in the block (none after)."""
    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(None)
