"""Fixtures for tracking processor tests: a journal, a projection table and SQL access to it."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import psycopg
import pytest

from journal_support import JournalFactory
from ordo import Journal
from ordo.storage.location import SQLiteLocation, parse_location
from processing_support import WRITE, SqlRunner


@pytest.fixture
def journal(journal_factory: JournalFactory) -> Journal:
    """A Journal at `journal_url` that flushes its tag views as the processors' source expects."""
    return journal_factory(settings=WRITE)


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
