"""Fixtures of the change source tests: for PostgreSQL, statements run durably and sources on
slots of their own that are dropped after the test; for SQLite, an application's `database` of
two tables and a `source` capturing both.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import psycopg
import pytest

from ordo.storage.postgres.change_source import PostgresChangeSource
from ordo.storage.sqlite.change_source import SQLiteChangeSource
from postgres_source_support import Capture, fresh_slot


@pytest.fixture
def run(postgres_dsn: str) -> Callable[..., None]:
    """Run statements in one transaction, committed durably so the slot can decode it at once.

    The throwaway server runs with synchronous_commit=off, which leaves a commit unflushed (and
    invisible to logical decoding) for up to the WAL writer's delay.
    """

    def execute(*statements: str | tuple[str, Sequence[object]]) -> None:
        with psycopg.connect(postgres_dsn) as conn:
            conn.execute("SET synchronous_commit = on")
            for statement in statements:
                query, params = (statement, ()) if isinstance(statement, str) else statement
                conn.execute(query, params)

    return execute


@pytest.fixture
def capture(postgres_dsn: str) -> Iterator[Capture]:
    """Creates sources on slots unique to the test (slots are cluster-wide); drops them after."""
    opened: list[PostgresChangeSource] = []

    def factory(
        *tables: str, slot: str | None = None, create: bool = True, dsn: str | None = None
    ) -> PostgresChangeSource:
        """A source of `tables` on `slot` (a fresh one by default), over `dsn` if given."""
        name = slot or fresh_slot()
        source = PostgresChangeSource(dsn or postgres_dsn, slot=name, tables=tables)
        opened.append(source)
        if create:
            source.create()
        return source

    yield factory
    for source in opened:
        source.drop()
        source.close()


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL, active BOOLEAN, "
            "photo BLOB, score REAL)"
        )
        conn.execute(
            "CREATE TABLE orders (id TEXT, line INTEGER, qty INTEGER, PRIMARY KEY (id, line))"
        )
    return path


@pytest.fixture
def source(database: Path) -> Iterator[SQLiteChangeSource]:
    opened = SQLiteChangeSource(database, ["users", "orders"])
    opened.install()
    yield opened
    opened.close()
