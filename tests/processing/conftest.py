"""Fixtures for tracking processor tests: a projection table and SQL access to it."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing

import psycopg
import pytest

from ordo.storage.location import SQLiteLocation, parse_location

SqlRunner = Callable[..., list[tuple[object, ...]]]


@pytest.fixture
def sql(journal_url: str) -> SqlRunner:
    """Run one statement on the journal's database (placeholders: `?`, rewritten as needed)."""
    location = parse_location(journal_url)

    def run(statement: str, *params: object) -> list[tuple[object, ...]]:
        if isinstance(location, SQLiteLocation):
            with closing(sqlite3.connect(location.path, timeout=30)) as conn, conn:
                return conn.execute(statement, params).fetchall()
        with psycopg.connect(journal_url, autocommit=True) as pg:
            cursor = pg.execute(statement.replace("?", "%s"), params)
            return cursor.fetchall() if cursor.description else []

    run(
        "CREATE TABLE IF NOT EXISTS counts (pid TEXT PRIMARY KEY, n BIGINT NOT NULL, "
        "last BIGINT NOT NULL, replays BIGINT NOT NULL)"
    )
    return run
