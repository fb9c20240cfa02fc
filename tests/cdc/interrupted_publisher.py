"""A publisher that Ctrl-C interrupts mid-publish: the child process of test_change_log_crash.py.

usage: python interrupted_publisher.py CHANGE_LOG

It publishes `killed_window()` with `KILLED_PARTITIONS` partitions; the first file staged sends
SIGINT to the process and goes on only once the main thread has taken it, so that the
KeyboardInterrupt comes while the publish's files are being staged. It then prints the log's
hidden parts as one JSON list, publishes the window again with the same change log (as a program
that goes on after an interrupt does) and prints them again.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).parent.parent))  # the tests' support modules

from change_log_support import KILLED_PARTITIONS, killed_window
from ordo.cdc import Publisher
from ordo.storage.parquet import ParquetChangeLog

if TYPE_CHECKING:
    from _typeshed import HasFileno

_interrupted = threading.Event()
_first = threading.Lock()
"""Taken by the staging thread that sends SIGINT, never given back: one Ctrl-C, not one each."""
_sync = os.fsync


def interrupt(_number: int, _frame: FrameType | None) -> None:
    """Python's own SIGINT handling (KeyboardInterrupt), telling the staging thread it came."""
    _interrupted.set()
    raise KeyboardInterrupt


def sync_once_interrupted(fd: int | HasFileno) -> None:
    """Stand-in for os.fsync: a staged file (on a thread of the publish) waits for Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        if _first.acquire(blocking=False):
            os.kill(os.getpid(), signal.SIGINT)
        _interrupted.wait()
    _sync(fd)


def main(root: str) -> None:
    signal.signal(signal.SIGINT, interrupt)
    os.fsync = sync_once_interrupted
    publisher = Publisher(ParquetChangeLog(root), partitions=KILLED_PARTITIONS)
    try:
        publisher.publish(killed_window())
    except KeyboardInterrupt:
        pass
    else:
        sys.exit("the publish was not interrupted")
    table = Path(root) / "users"
    print(json.dumps(sorted(p.name for p in table.glob("partition=*/.*"))), flush=True)
    publisher.publish(killed_window())
    print(json.dumps(sorted(p.name for p in table.glob("partition=*/.*"))), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
