"""Running code as a user a folder's permissions stop, although the tests run as root.

Root reads and lists any folder whatever its mode: the kernel lets it through because of two
capabilities, CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH. `as_unprivileged` runs a function in a
thread of its own that gives both up for good (capabilities belong to a thread, so the rest of
the test run keeps them), and there `chmod 000` refuses a listing as it does any other user.
Run as another user, the tests lose nothing: that user has neither capability to give up.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

_CAPABILITY_VERSION_3 = 0x20080522
"""_LINUX_CAPABILITY_VERSION_3 (linux/capability.h): two 32-bit words per set."""
_FILE_PERMISSION_OVERRIDES = (1 << 1) | (1 << 2)
"""CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, both in the first word."""


class _Header(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _Sets(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


def _give_up_file_permission_overrides() -> None:
    """Drop both capabilities from this thread's effective and permitted sets (for good).

    Permitted too: `os.access` (which click's readable-path checks use) answers for root from
    the permitted set, so keeping it there would make those checks pass where a user's fail.
    """
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    header = _Header(_CAPABILITY_VERSION_3, 0)
    sets = (_Sets * 2)()
    if libc.capget(ctypes.byref(header), sets) != 0:
        raise OSError(ctypes.get_errno(), "capget")
    sets[0].effective &= ~_FILE_PERMISSION_OVERRIDES
    sets[0].permitted &= ~_FILE_PERMISSION_OVERRIDES
    if libc.capset(ctypes.byref(header), sets) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def as_unprivileged(function: Callable[[], T]) -> T:
    """`function()`'s result (or its exception), run where file permissions stop it."""
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            _give_up_file_permission_overrides()
            outcome.append(function())
        except BaseException as exc:  # re-raised in the caller's thread
            failure.append(exc)

    thread = threading.Thread(target=run, name="unprivileged")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return outcome[0]


def locked_out(folder: Path, function: Callable[[], T]) -> T:
    """`function()` run where file permissions stop it, while `folder` has no permission bits.

    The folder's mode comes back afterwards, so that pytest can remove it.
    """
    mode = folder.stat().st_mode & 0o7777
    folder.chmod(0)
    try:
        return as_unprivileged(function)
    finally:
        folder.chmod(mode)
