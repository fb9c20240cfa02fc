"""The throwaway PostgreSQL server and the per-test schema fixture."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql

pytestmark = pytest.mark.postgres


def test_the_server_has_logical_wal_and_the_test_schema_first(postgres_dsn: str) -> None:
    with psycopg.connect(postgres_dsn) as conn:
        wal_level = conn.execute("SHOW wal_level").fetchone()
        schema = conn.execute("SELECT current_schema()").fetchone()
    assert wal_level == ("logical",)
    assert schema is not None
    assert schema[0].startswith("t_")
    assert schema[0] in postgres_dsn  # the fixture named this schema in the DSN


# Runs twice: each run fails if it sees the table the other one left behind.
@pytest.mark.parametrize("run", ["first", "second"])
def test_each_test_gets_a_fresh_empty_schema(postgres_dsn: str, run: str) -> None:
    with psycopg.connect(postgres_dsn) as conn:
        row = conn.execute("SELECT current_schema()").fetchone()
        assert row is not None
        schema = row[0]
        tables = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = %s", (schema,)
        ).fetchone()
        assert schema.startswith("t_")
        assert tables == (0,)
        table = sql.Identifier(f"left_behind_by_{run}")
        conn.execute(sql.SQL("CREATE TABLE {} (id int)").format(table))
