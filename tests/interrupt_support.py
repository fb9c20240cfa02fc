"""Ctrl-C or SIGTERM at each point where a signal's handler could run, deterministically.

Python runs a signal's handler after any call into C returns (its KeyboardInterrupt, or ordo's
`Terminated`, raised right there). A profile function that raises at the n-th such return, for
every n, puts that interrupt at each point where a signal's could land, as `sys.setprofile`
reports C calls on the thread that sets it (not on the threads the block starts).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType


@contextmanager
def interrupted_after(calls: int, *, sparing: str = "") -> Iterator[None]:
    """KeyboardInterrupt as the `calls`-th C call of this thread in the block returns.

    C calls made within the package `sparing` (its functions and all they call) are not
    counted: a library's own window, which no caller can close, is left out of a test of the
    caller's.
    """
    returned = 0

    def profile(frame: FrameType, event: str, _arg: object) -> None:
        nonlocal returned
        if event == "c_return" and not (sparing and _within(frame, sparing)):
            returned += 1
            if returned == calls:
                raise KeyboardInterrupt  # the profile function is unset with it

    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(None)


@contextmanager
def signalled_after(
    calls: int, number: signal.Signals, *, within: Callable[..., object]
) -> Iterator[None]:
    """Signal `number` as the `calls`-th C call of this thread within `within` returns.

    What Python does when the signal comes: it runs the handler installed for `number` right
    there. The default handlers raise (KeyboardInterrupt, or a command's `Terminated`); a
    command that takes the signal as a flag (`ordo.interrupts.stop_flag`) sets it and goes on.
    Only the C calls made while `within` (a Python function) runs are counted, so that a loop
    over `calls` puts the signal at each point of that work, not of all a command does.
    """
    code = getattr(within, "__code__", None)
    if code is None:
        msg = f"{within!r} is no Python function"
        raise TypeError(msg)
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
                handler = signal.getsignal(number)
                if callable(handler):
                    handler(number, frame)  # what it raises unsets the profile function

    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(None)


def _within(frame: FrameType | None, package: str) -> bool:
    """Whether `frame` or one of its callers runs code of `package`."""
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if module == package or module.startswith(f"{package}."):
            return True
        frame = frame.f_back
    return False
