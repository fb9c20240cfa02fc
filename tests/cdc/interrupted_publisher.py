"""A publisher that Ctrl-C interrupts mid-publish: the child process of test_change_log_crash.py.

usage: python interrupted_publisher.py CHANGE_LOG WHEN

It publishes `killed_window()` with `KILLED_PARTITIONS` partitions, and SIGINT comes WHEN:
- "staging": the first file staged sends it to the main thread (`press_ctrl_c`) and goes on only
  once that has taken it, so that the KeyboardInterrupt comes while the files are being staged;
- "starting": the main thread raises it as soon as it has started the publish's second thread,
  so that the KeyboardInterrupt comes inside `Thread.start`, before what starts the thread (a
  thread pool's `submit`) may record it. That thread, given a file, holds it back until the
  publish has returned (`name_stray_part`), as a thread the system runs late would: a publish
  that does not stop it finds no part of it to remove, and it stages one afterwards.
It then waits for the publish's threads to end, prints the log's hidden parts as one JSON list,
publishes the window again with the same change log (as a program that goes on after an
interrupt does) and prints them again.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import uuid
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
_sync, _start, _uuid4 = os.fsync, threading.Thread.start, uuid.uuid4
_started: list[threading.Thread] = []
"""The threads started since the child began, in order: the publishes' writers."""
_stray_has_file = threading.Event()
"""Set once the thread started second was given a file, or the interrupted publish returned."""
_published = threading.Event()
"""Set once the interrupted publish has returned."""


RESEND_S = 0.05
"""How often the staging thread sends SIGINT again until the main thread has taken it."""


def interrupt(_number: int, _frame: FrameType | None) -> None:
    """Python's own SIGINT handling (KeyboardInterrupt), telling the staging thread it came.

    Once only: the SIGINTs sent again (`press_ctrl_c`) are one Ctrl-C.
    """
    if not _interrupted.is_set():
        _interrupted.set()
        raise KeyboardInterrupt


def press_ctrl_c() -> None:
    """Send SIGINT to the main thread until it has taken it.

    To the main thread, which the signal then wakes from a blocking wait; and again, because
    one that comes just as the main thread starts such a wait (after its last look at signals)
    is taken only once the wait ends, which here it would not: the writers wait for it.
    """
    while not _interrupted.is_set():
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
        _interrupted.wait(RESEND_S)


def sync_once_interrupted(fd: int | HasFileno) -> None:
    """Stand-in for os.fsync: a staged file (on a thread of the publish) waits for Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        if _first.acquire(blocking=False):
            press_ctrl_c()
        _interrupted.wait()
    _sync(fd)


def start_interrupted(thread: threading.Thread) -> None:
    """Stand-in for Thread.start: Ctrl-C as the second thread (a writer) has just started."""
    _started.append(thread)
    _start(thread)
    if len(_started) == 2:
        signal.raise_signal(signal.SIGINT)


def sync_beside_stray(fd: int | HasFileno) -> None:
    """Stand-in for os.fsync: the first thread's file waits until the stray has a file too (or
    the publish returned), so that the first thread cannot take every file handed out."""
    if threading.current_thread() in _started[:1]:
        _stray_has_file.wait()
    _sync(fd)


def name_stray_part() -> uuid.UUID:
    """Stand-in for uuid.uuid4, which names a part before it is written: the stray thread (the
    second) goes on with its file only once the interrupted publish has returned."""
    if threading.current_thread() in _started[1:2]:
        _stray_has_file.set()
        _published.wait()
    return _uuid4()


def interrupted_publish(publisher: Publisher) -> None:
    """Publish the window, which Ctrl-C interrupts; exit unless it does."""
    try:
        publisher.publish(killed_window())
    except KeyboardInterrupt:
        pass
    else:
        sys.exit("the publish was not interrupted")
    _stray_has_file.set()
    _published.set()


def main(root: str, when: str) -> None:
    signal.signal(signal.SIGINT, interrupt)
    if when == "staging":
        os.fsync = sync_once_interrupted
    else:
        threading.Thread.start = start_interrupted  # type: ignore[assignment,method-assign]
        os.fsync, uuid.uuid4 = sync_beside_stray, name_stray_part
    publisher = Publisher(ParquetChangeLog(root), partitions=KILLED_PARTITIONS)
    interrupted_publish(publisher)
    for thread in _started:
        thread.join()
    table = Path(root) / "users"
    print(json.dumps(sorted(p.name for p in table.glob("partition=*/.*"))), flush=True)
    publisher.publish(killed_window())
    print(json.dumps(sorted(p.name for p in table.glob("partition=*/.*"))), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
