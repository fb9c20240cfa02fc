"""The threads that write a change log publish's files, which stop with it.

A publish writes its files on a few threads at once (Parquet encoding and fsync release the GIL),
and when it stops (a file that failed, Ctrl-C on the main thread) it removes the hidden parts
they staged. That is sound only once no writer runs any more, nor starts later, wherever Ctrl-C
lands, and the waits of the standard library do not promise it:
- Ctrl-C as `ThreadPoolExecutor.submit` starts a thread interrupts `Thread.start` once the thread
  runs but before the pool records it: the pool's shutdown did not wait for it, and it wrote its
  file after the publish had removed the others, a hidden part that nothing removed;
- Ctrl-C in `Thread.join` (Python 3.11) releases the running thread's own lock and takes it for
  ended, and in `concurrent.futures.wait` it may leave a future's lock taken, which a writer
  then waits for forever.
Here the main thread waits on one plain lock, which Ctrl-C leaves as it was, and writes start only
once every thread was started: Ctrl-C before that stops them all unwritten.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class _Writes(Generic[T, R]):
    """The writes of one run, which its `threads` take one at a time (`take`).

    Until none is left or the run stopped; none is taken before `ready`, set once every thread
    was started. `wait` returns once every thread ended.
    """

    def __init__(self, write: Callable[[T], R], items: Sequence[T], threads: int) -> None:
        self._write, self._items = write, items
        self._taken = 0
        self._running = threads
        self._taking = threading.Lock()
        """Taken by the writer threads only: Ctrl-C on the main thread cannot leave it taken."""
        self.ready = threading.Event()
        self.stopped = False
        """Set by the main thread when the run stops: no write is taken after it."""
        self._ended = threading.Lock()
        """Held from here until the last thread ends, which releases it (`wait`)."""
        self._ended.acquire()
        self._all_ended = False
        self.results: dict[int, R] = {}
        self.failures: dict[int, BaseException] = {}

    def take(self) -> None:
        """A writer thread's work: the writes not taken yet, until the run stopped."""
        self.ready.wait()
        try:
            while (index := self._next()) is not None:
                try:
                    self.results[index] = self._write(self._items[index])
                except BaseException as failure:  # raised on the main thread, as a pool would
                    self.failures[index] = failure
        finally:
            with self._taking:
                self._running -= 1
                last = self._running == 0
            if last:
                self._all_ended = True  # before the release: a `wait` that took it sees it
                self._ended.release()

    def _next(self) -> int | None:
        with self._taking:
            if self.stopped or self._taken == len(self._items):
                return None
            self._taken += 1
            return self._taken - 1

    def wait(self) -> None:
        """Return once every thread ended; again after Ctrl-C interrupted a wait.

        A wait that Ctrl-C interrupts holds the lock or not, as a plain lock's acquire leaves
        it: held only once the last thread released it, which it does after `_all_ended`.
        """
        if not self._all_ended:
            self._ended.acquire()


def write_in_threads(write: Callable[[T], R], items: Sequence[T], threads: int) -> list[R]:
    """`write` each of `items` on up to `threads` threads; their results, in the items' order.

    Once every write ended, the first failure in that order is raised. However it ends (Ctrl-C
    as it starts the threads or waits for them included), no write runs once it returned or
    raised, and none starts later: the caller may then remove what they staged.
    """
    if not items:
        return []
    count = min(len(items), threads)
    writes = _Writes(write, items, count)
    try:
        for _ in range(count):
            threading.Thread(target=writes.take, name="change log writer").start()
        writes.ready.set()
        writes.wait()
    finally:
        started = writes.ready.is_set()  # else no thread took a write, nor will
        writes.stopped = True
        writes.ready.set()
        if started:
            writes.wait()
    if writes.failures:
        raise writes.failures[min(writes.failures)]
    return [writes.results[index] for index in range(len(items))]
