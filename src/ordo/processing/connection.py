"""The SQL connection a handler writes through: what sqlite3's and psycopg's have in common.

A handler is given the batch transaction's connection (`HandlerContext.connection`), a
`sqlite3.Connection` or a `psycopg.Connection` depending on the database. These protocols
name what both drivers provide with the same meaning, so that a handler type-checks against
either; storage runs its own SQL through the same protocols, and its real connections fit
them structurally.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol


class SqlCursor(Protocol):
    """What sqlite3's and psycopg's cursors both provide (rows are tuples)."""

    @property
    def rowcount(self) -> int:
        """Rows changed by the last statement."""
        ...

    @property
    def description(self) -> Sequence[Any] | None:
        """One entry per column of the result, its name first; None without a result."""
        ...

    def fetchone(self) -> Any:
        """The next row, or None."""
        ...

    def fetchmany(self, size: int = ...) -> list[Any]:
        """Up to `size` of the remaining rows."""
        ...

    def fetchall(self) -> list[Any]:
        """Every remaining row."""
        ...

    def __iter__(self) -> Iterator[Any]:
        """The remaining rows, one at a time."""
        ...


class SqlConnection(Protocol):
    """What sqlite3's and psycopg's connections both provide: execute() returning a cursor.

    Parameters go where the driver's placeholder is (`HandlerContext.placeholder`: `?` on
    SQLite, `%s` on PostgreSQL).
    """

    def execute(self, sql: Any, params: Any = ..., /) -> SqlCursor:
        """Run one statement with its parameters."""
        ...
