"""Exclusive lock files: at most one running copy of a job per source or checkpoint.

An operator who starts a job twice (a second terminal, a cron overlap, a container restarted
while the old one still runs) gets the second copy refused at once, naming the first, instead of
two copies publishing the same changes or racing over one checkpoint. The lock is `flock`'s: the
kernel releases it when its process ends, however it ends, so a crashed job leaves no stale lock
(the file stays, unlocked, and the next run takes it). A job that ends removes its lock file, so
none is left beside a user's database once nothing runs.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ordo.errors import AlreadyRunningError
from ordo.forking import OpeningProcess
from ordo.storage.file_errors import file_system_error

_HOLDER_READS, _HOLDER_WAIT_S = 25, 0.02
LOCK_FILE = ".ordo.lock"
"""The lock file a job keeps in a folder of its own (a streaming query's checkpoint)."""


@contextmanager
def exclusive_lock(path: Path, running: str) -> Iterator[None]:
    """Hold the lock file `path` (made with its folders) for the block.

    AlreadyRunningError (`<running> (pid N on HOST); stop it first, ...`) when another process
    holds it; `running` says what, as "a capture of shop.db is already running". The holder
    writes its pid and host into the file for that message; the file is opened without
    truncating, so a refused copy never erases the holder's. A lock file that cannot be made (its
    folder may not be written, it is a folder) is a StorageUnavailableError naming it
    (StorageAccessError for a permission), as the job's other files are, not the OSError's
    traceback. A child made by os.fork inside the block that leaves it (a raw fork's child
    unwinds its parent's frames) does not remove the file its parent still holds.
    """
    holder = OpeningProcess(f"the lock file {path}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = _locked(path, running)
    except OSError as exc:
        msg = f"cannot take the lock file {path}"
        raise file_system_error(msg, exc) from exc
    try:
        os.ftruncate(descriptor, 0)
        os.write(descriptor, f"pid {os.getpid()} on {socket.gethostname()}".encode())
        yield
    finally:
        if holder.is_current:
            path.unlink(missing_ok=True)  # while still held: no one takes the file being removed
        os.close(descriptor)  # releases the lock once no process has it open


def _locked(path: Path, running: str) -> int:
    """A descriptor of `path` holding its lock; AlreadyRunningError when another holds it.

    A holder removes the file as it ends, so the file opened here may be one that was removed
    before this copy locked it (or replaced by a newer copy's): the lock then holds nothing,
    and the file is opened again until the locked file is the one at `path`.
    """
    while True:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            msg = (
                f"{running} ({_holder(descriptor)}); stop it first, or wait for it to end "
                f"(lock file {path})"
            )
            os.close(descriptor)
            raise AlreadyRunningError(msg) from None
        if _is_at(descriptor, path):
            return descriptor
        os.close(descriptor)


def _is_at(descriptor: int, path: Path) -> bool:
    """Whether `descriptor`'s file is the one `path` names now."""
    try:
        named = path.stat()
    except FileNotFoundError:
        return False
    opened = os.fstat(descriptor)
    return (named.st_ino, named.st_dev) == (opened.st_ino, opened.st_dev)


def _holder(descriptor: int) -> str:
    """What the lock's holder wrote about itself ("pid N on HOST").

    A holder writes it just after taking the lock: a copy started at the same moment waits a
    little for it rather than name nobody.
    """
    for _ in range(_HOLDER_READS):
        text = os.pread(descriptor, 200, 0).decode("utf-8", "replace").strip()
        if text:
            return text
        time.sleep(_HOLDER_WAIT_S)
    return "its pid is not written yet"
