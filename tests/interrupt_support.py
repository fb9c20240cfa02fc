"""Ctrl-C or SIGTERM at each point where a signal's handler could run, deterministically.

Python runs a signal's handler after any call into C returns (its KeyboardInterrupt, or ordo's
`Terminated`, raised right there). A profile function that raises at the n-th such return, for
every n, puts that interrupt at each point where a signal's could land, as `sys.setprofile`
reports C calls on the thread that sets it (not on the threads the block starts).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


@contextmanager
def interrupted_after(calls: int) -> Iterator[None]:
    """KeyboardInterrupt as the `calls`-th C call of this thread in the block returns."""
    returned = 0

    def profile(_frame: FrameType, event: str, _arg: object) -> None:
        nonlocal returned
        if event == "c_return":
            returned += 1
            if returned == calls:
                raise KeyboardInterrupt  # the profile function is unset with it

    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(None)
