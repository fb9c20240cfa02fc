"""What the PostgreSQL change source tests share: the type of their `capture` fixture, the
summary of captured mutations they compare, fresh slot names, and how many slots of a name
the server holds.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence

import psycopg

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


def fresh_slot() -> str:
    """A replication slot (or role) name no other test uses: tests share one server."""
    return f"ordo_test_{secrets.token_hex(6)}"


def slot_count(dsn: str, name: str) -> int:
    """How many replication slots named `name` the server holds: 0 where none was left behind."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s", (name,)
        ).fetchone()
    return 0 if row is None else int(row[0])
