"""The process that opened a Journal, stores or a change source: only it may use them.

A child made by os.fork (multiprocessing's default start method on Linux) inherits copies of
the parent's objects. Their connections are the parent's: SQLite's locks and PostgreSQL's
session would be used by two processes at once, and closing them in the child would end the
parent's session (and release a capture's lock on its slot). Their threads (a tag writer's
flusher, the writer lease's heartbeat, a tag listener's) do not run in the child. So they are
refused there, and each process opens its own.
"""

from __future__ import annotations

import os

from ordo.errors import ForkedProcessError


class OpeningProcess:
    """Remembers the process that opened something (`what`) and refuses it to any other."""

    __slots__ = ("_pid", "_what")

    def __init__(self, what: str) -> None:
        """`what` names the object in the error ("the stores of SQLite database /x.db")."""
        self._pid = os.getpid()
        self._what = what

    @property
    def is_current(self) -> bool:
        """Whether the calling process opened it; close() does nothing in another one."""
        return os.getpid() == self._pid

    def refuse_other(self) -> None:
        """ForkedProcessError unless the calling process opened it (one getpid per call)."""
        if os.getpid() != self._pid:
            raise ForkedProcessError(what=self._what, opened_in=self._pid, used_in=os.getpid())
