"""What the PostgreSQL change source tests share: the type of their `capture` fixture, the
summary of captured mutations they compare, fresh slot names, how many slots of a name the
server holds, and DSNs whose sessions start with a setting of their own.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg.conninfo import make_conninfo

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


def with_server_option(dsn: str, option: str) -> str:
    """`dsn` whose sessions also start with `option` (`-csearch_path=s`), as libpq's `options`.

    A URL DSN keeps the options it has (a key=value conninfo takes `option` as its options):
    sessions of the result start as a database or role default (`ALTER DATABASE ... SET`)
    would start them, without changing the shared server for other tests.
    """
    if not dsn.startswith(("postgresql://", "postgres://")):
        return make_conninfo(dsn, options=option)
    parts = urlsplit(dsn)
    query = parse_qsl(parts.query, keep_blank_values=True)
    existing = [value for key, value in query if key == "options"]
    query = [(key, value) for key, value in query if key != "options"]
    query.append(("options", " ".join([*existing, option])))
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))
