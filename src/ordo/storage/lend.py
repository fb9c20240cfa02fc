"""The end of a lent connection's `with` block, in either store: commit, or abandon the lend.

A class's `__exit__` rather than a generator's context manager (contextlib): Python runs a
signal's handler where a call into C returns, and where such a generator had yielded and its
caller's block had not begun, an interrupt skipped the end altogether (see
`ordo.storage.sqlite.write_transaction` and `ordo.storage.postgres.lent_connection`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Generic, TypeVar

C = TypeVar("C")


class Lend(ABC, Generic[C]):
    """Commits on a clean exit and gives the connection back; abandons the lend otherwise.

    Whatever is raised during the commit abandons it too. The subclass's `__enter__` lends
    `_conn`, and abandons the lend itself when it cannot return it.
    """

    _conn: C | None = None

    def __exit__(
        self,
        _kind: type[BaseException] | None,
        exc: BaseException | None,
        _traceback: TracebackType | None,
    ) -> None:
        conn, self._conn = self._conn, None
        assert conn is not None, "exited a lend that was not entered"  # noqa: S101
        if exc is not None:
            self._abandon(conn, exc)
            return
        try:
            self._commit(conn)
        except BaseException as failure:
            self._abandon(conn, failure)
            raise
        self._give_back(conn)

    @abstractmethod
    def _commit(self, conn: C) -> None:
        """End the block's work on `conn` as written."""

    @abstractmethod
    def _abandon(self, conn: C, exc: BaseException) -> None:
        """Roll back what is open and give `conn` back; raise ordo's error for a driver's `exc`."""

    @abstractmethod
    def _give_back(self, conn: C) -> None:
        """End the lend of `conn`."""
