"""Fixtures of the PostgreSQL change source tests: statements run durably, and sources on
slots of their own that are dropped after the test.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator, Sequence

import psycopg
import pytest

from ordo.storage.postgres.change_source import PostgresChangeSource
from postgres_source_support import Capture


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

    def factory(*tables: str, slot: str | None = None, create: bool = True) -> PostgresChangeSource:
        name = slot or f"ordo_test_{secrets.token_hex(6)}"
        source = PostgresChangeSource(postgres_dsn, slot=name, tables=tables)
        opened.append(source)
        if create:
            source.create()
        return source

    yield factory
    for source in opened:
        source.drop()
        source.close()
