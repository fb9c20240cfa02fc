"""Which file a store's SQLite connections have open: a journal taken away under them is refused.

A connection keeps its file open: a journal removed, moved away or replaced (another file
renamed onto its path) under open stores was still written through the connections opened
before, into a file no one would open again, and every write was lost without a word; and a
thread that connected afterwards opened another journal put in its place (one store, two
files). A store records the file its first connection opened, by device and inode
(`OpenedFile`), and each write transaction and each new connection look at the path again:
one `os.stat`, about 2.5 % of an append of one event (see docs/operations.md).
"""

from __future__ import annotations

import os
from pathlib import Path

from ordo.errors import StorageAccessError


class OpenedFile:
    """The file at `path` when the store opened it, by device and inode.

    A link to the file or a rename of it keeps them; another file has its own.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._name = os.fspath(path)  # os.stat of a str: no Path to convert on every write
        self._identity = self._now()

    @property
    def identity(self) -> tuple[int, int] | None:
        """The device and inode of the file opened; None when there was none to see."""
        return self._identity

    def refuse_another(self, *, doing: str, what: str) -> None:
        """StorageAccessError unless `path` still names the file opened.

        The message begins "cannot `doing` SQLite `what` /x" and says what became of the file.
        No retry mends it: the file opened is gone from the path for good. A file that was
        not there when the store opened it (none to compare) is not refused.
        """
        now = self._now()
        if now == self._identity or self._identity is None:
            return
        became = "was removed or moved away" if now is None else "was replaced by another file"
        msg = (
            f"cannot {doing} SQLite {what} {self.path}: it {became} after it was opened "
            "(what the store writes would be lost)"
        )
        raise StorageAccessError(msg)

    def _now(self) -> tuple[int, int] | None:
        """The device and inode of the file at the path now; None when none can be seen."""
        try:
            status = os.stat(self._name)
        except OSError:
            return None
        return status.st_dev, status.st_ino
