"""What the PostgreSQL change source tests share: the type of their `capture` fixture, and
the summary of captured mutations they compare.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ordo.cdc.mutation import Mutation
from ordo.storage.postgres.change_source import PostgresChangeSource

Capture = Callable[..., PostgresChangeSource]


def summary(mutations: Sequence[Mutation]) -> list[tuple[object, ...]]:
    """(table, key, kind, values) per mutation: kind is "upsert" or "delete"."""
    return [
        (
            m.table,
            m.partition_key,
            "delete" if m.row_deleted_at is not None else "upsert",
            {name: cell.value for name, cell in m.cells.items()},
        )
        for m in mutations
    ]
