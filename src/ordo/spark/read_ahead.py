"""The planner's pages of a SQLite journal, read by two processes at once.

Planning a micro-batch reads the tag's keys a page (50,000 rows) after the other, and on SQLite
that read is most of the planning (about 0.5 s of 0.6 s for 1,000,000 keys), in one process
while the executors wait for the plan. Two threads read no faster than one (SQLite's memory
allocator takes a lock of the whole library); two processes read in about half the time. So
after a full page the planner's own reads stop at a key a few pages ahead (`_Split.start`,
guessed from the time the page spanned), while a second process (read_ahead_process) reads
the pages after that key. When the planner's reads reach it, the page it asked for is its own
last, short, page joined with the other process's first; then the other process's pages, as
they are. A page may so hold more rows than `limit`: the state machine takes any page of at
least `limit` rows as one that more may follow. Every page still holds every row after its
`after` up to its greatest key (up to `up_to` when it has fewer than `limit` rows), read at
some instant after the request, as a read of one page does: which rows the eventual-
consistency delay has let in is the state machine's to judge, as for any read.

Anything unexpected (a request that does not continue the split, a bucket or bound of its own,
the other process failing or not starting) drops the split and reads the page directly, as
without read-ahead.
"""

from __future__ import annotations

import logging
import pickle
import queue
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

import numpy as np

from ordo.query import TagViewPage
from ordo.spark.packed_arrow import greatest_key
from ordo.storage.packed_reads import PackedRows, Packing, joined, unpack
from ordo.storage.sql_tag_view_store import AFTER_PARAMETER
from ordo.storage.sqlite.datastore import BUSY_TIMEOUT_S
from ordo.storage.sqlite.tag_view_store import SQLiteTagViewStore
from ordo.time import GREGORIAN_OFFSET_100NS, TimeUUID
from ordo.time.timeuuid import TIMESTAMP_MASK

logger = logging.getLogger(__name__)

PAGES_AHEAD = 4
"""Pages the planner reads itself before the other process's share, and the size of that share.
More would leave more read for nothing when a plan stops before it reaches them."""
_PROCESS = Path(__file__).with_name("read_ahead_process.py")
_FRAME_GRACE_S = 30.0
"""How much longer than SQLite's busy timeout a page of the other process may take."""


@dataclass(slots=True)
class _Split:
    """Pages of a (tag, bucket) up to `up_to`: the other process reads those after `start`."""

    theirs: TagViewPage
    """The other process's first page: after `start` (its `after`), up to the split's end."""
    columns: Sequence[tuple[str, Packing]]
    reader: _Reader
    cursor: bytes | None = None
    """The greatest key of the other process's last page served; None before its first."""

    @property
    def start(self) -> bytes:
        """Where the other process's pages begin (its first page's `after`)."""
        return self.theirs.after

    def is_for(self, page: TagViewPage, columns: Sequence[tuple[str, Packing]]) -> bool:
        """Whether a read of this page is one of the split's: the same but for its `after`."""
        return columns == self.columns and replace(page, after=self.start) == self.theirs


class ReadAheadPages:
    """A SQLite tag view store's packed pages, read in two processes when there are many."""

    def __init__(self, store: SQLiteTagViewStore) -> None:
        self._store = store
        self._reader: _Reader | None = None
        self._split: _Split | None = None
        self._can_start = True
        """False once the other process could not start: it is not tried again."""

    def read_packed(self, page: TagViewPage, columns: Sequence[tuple[str, Packing]]) -> PackedRows:
        """At least the page `read_packed` of the store returns, as the module says.

        A page of one persistence id or one segment is read directly (the planner reads
        neither).
        """
        if (
            page.persistence_id is not None
            or page.hash_mask is not None
            or columns[0] != ("timeuuid", Packing.KEY)
        ):
            return self._store.read_packed(page, columns)
        split = self._split
        if split is not None and split.is_for(page, columns):
            rows = self._continued(split, page.after)
            if rows is not None:
                return rows
        self._drop()
        rows = self._store.read_packed(page, columns)
        if rows.count >= page.limit:
            self._begin(page, columns, rows)
        return rows

    def close(self) -> None:
        """Stop the other process, if one was started."""
        self._split = None
        if self._reader is not None:
            self._reader.stop()
            self._reader = None

    def _continued(self, split: _Split, after: bytes) -> PackedRows | None:
        """The page after `after` within the split; None when the split cannot give it."""
        if split.cursor is None and after < split.start:
            mine = replace(split.theirs, after=after, up_to=split.start)
            own = self._store.read_packed(mine, split.columns)
            if own.count >= mine.limit:
                return own
            theirs = self._next_page(split)
            return None if theirs is None else joined(own, theirs, split.columns)
        if after == split.cursor:
            return self._next_page(split)
        return None

    def _next_page(self, split: _Split) -> PackedRows | None:
        """The other process's next page of the split; None if it failed (the split is over).

        After its last page, a full one, the next split begins there.
        """
        frame = split.reader.next_frame()
        if frame is None or frame[0] != "page":
            logger.debug("read-ahead dropped: %s", "no answer" if frame is None else frame[1])
            self._drop(failed=True)
            return None
        _, row, is_last = frame
        page = unpack(row, split.columns)
        if page.count:
            split.cursor = greatest_key(page.keys["timeuuid"])
        if is_last:
            self._split = None
            if page.count >= split.theirs.limit:
                self._begin(split.theirs, split.columns, page)
        return page

    def _begin(
        self, request: TagViewPage, columns: Sequence[tuple[str, Packing]], page: PackedRows
    ) -> None:
        """Have the other process read the pages from a few pages after the full `page`.

        `page` holds the rows of `request` (or of its split): the other process's pages are
        of the same (tag, bucket), up to the same bound, of the same size.
        """
        last = self._store.last_key(request.tag, request.time_bucket, up_to=request.up_to)
        if last is None:
            return
        first_ns, greatest_ns = _time_span(page.keys["timeuuid"])
        last_ns = TimeUUID.from_bytes(last).epoch_ns
        span = max(greatest_ns - first_ns, 100)
        start_ns = min(greatest_ns + PAGES_AHEAD * span, (greatest_ns + last_ns) // 2)
        start = TimeUUID.max_for_epoch_ns(start_ns).to_bytes()
        if start_ns <= greatest_ns or start >= last:
            return  # less than a page or so after this one: not worth a second reader
        reader = self._reader
        if reader is None:
            if not self._can_start:
                return
            reader = self._reader = _Reader.started()
            if reader is None:
                self._can_start = False
                return
        theirs = replace(request, after=start)
        query, params = self._store.packed_page_query(theirs, columns)
        shared = tuple(self._store.datastore.for_another_process())
        reader.request((shared, query, params, AFTER_PARAMETER, theirs.limit, PAGES_AHEAD))
        self._split = _Split(theirs, columns, reader)

    def _drop(self, *, failed: bool = False) -> None:
        """Forget the split; stop the other process if it may still be reading for it."""
        if self._split is None and not failed:
            return
        self._split = None
        if self._reader is not None:
            self._reader.stop()
            self._reader = None


class _Reader:
    """The other process, and a thread taking its pages as they come (it never waits on a pipe)."""

    def __init__(self, process: subprocess.Popen[bytes], requests: IO[bytes], answers: IO[bytes]):
        self._process = process
        self._requests = requests
        self._frames: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        threading.Thread(
            target=self._take, args=(answers,), name="ordo-read-ahead", daemon=True
        ).start()

    @classmethod
    def started(cls) -> _Reader | None:
        """A new process; None if it cannot start (the planner then reads alone)."""
        try:
            process = subprocess.Popen(  # noqa: S603 - this interpreter and ordo's own script
                [sys.executable, "-I", "-S", str(_PROCESS)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
        except OSError as exc:
            logger.debug("no read-ahead process: %s", exc)
            return None
        if process.stdin is None or process.stdout is None:  # not with PIPE; for the types
            process.kill()
            return None
        return cls(process, process.stdin, process.stdout)

    def request(self, request: tuple[Any, ...]) -> None:
        """Ask for pages; a process that is gone answers no more frames (`next_frame`)."""
        try:
            pickle.dump(request, self._requests, protocol=pickle.HIGHEST_PROTOCOL)
            self._requests.flush()
        except OSError:
            self._frames.put(None)

    def next_frame(self) -> tuple[Any, ...] | None:
        """The next frame; None when the process ended or took too long."""
        try:
            return self._frames.get(timeout=_FRAME_GRACE_S + BUSY_TIMEOUT_S)
        except queue.Empty:
            return None

    def stop(self) -> None:
        """End the process now (it may be reading pages no one will take)."""
        self._process.kill()
        self._process.wait()
        self._requests.close()

    def _take(self, answers: IO[bytes]) -> None:
        try:
            with answers:
                while True:
                    self._frames.put(pickle.load(answers))  # noqa: S301 - our own child's
        except (EOFError, OSError, ValueError, pickle.UnpicklingError):
            self._frames.put(None)


def _time_span(keys: bytes) -> tuple[int, int]:
    """The earliest and latest instants (epoch ns) of packed 16-byte keys."""
    stamps = np.frombuffer(keys, dtype=">u8")[0::2] & np.uint64(TIMESTAMP_MASK)
    low, high = (int(x) - GREGORIAN_OFFSET_100NS for x in (stamps.min(), stamps.max()))
    return low * 100, high * 100
