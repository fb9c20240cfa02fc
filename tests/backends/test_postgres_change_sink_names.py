"""Names of a materialized table and its columns that PostgreSQL cannot hold as they are."""

from __future__ import annotations

import psycopg
import pytest

from cdc_support import apply_as_m, history_of, keyed_message
from ordo.cdc import ChangeOp, Column, ColumnType, TableSchema
from ordo.errors import CdcError
from ordo.storage.open import stores_at

LONG = "é" * 32
"""64 bytes in UTF-8, though 32 characters: one byte more than a PostgreSQL name holds."""
QUERY = "3f5e0d1c-0000-4000-8000-000000000001"


def _schema(column: str) -> TableSchema:
    return TableSchema(
        table="t",
        columns=(
            Column(name="id", type=ColumnType.LONG, nullable=False),
            Column(name=column, type=ColumnType.STRING),
        ),
        partition_key=("id",),
    )


@pytest.mark.postgres
@pytest.mark.parametrize(("target", "column"), [("t_materialized", LONG), (LONG, "v")])
def test_a_name_longer_than_postgresql_keeps_is_refused_before_anything_is_stored(
    postgres_dsn: str, target: str, column: str
) -> None:
    """PostgreSQL cut such a name to its first 63 bytes: the table was created with the column
    cut short, and the next batch's ALTER TABLE ADD COLUMN of the missing column failed (a
    materializer stopped for good at its second batch); two tables or columns whose names
    begin alike were one."""
    message = keyed_message(
        "t", ChangeOp.CREATE, 1, None, {"id": 1, column: "x"}, schema_id=1, at=1
    )
    with stores_at(postgres_dsn) as stores:
        before = _tables(postgres_dsn)
        with pytest.raises(CdcError) as refused:
            apply_as_m(
                stores.change_sink, 0, [message], history_of(_schema(column)),
                query_id=QUERY, target_table=target,
            )  # fmt: skip
        assert str(refused.value) == (
            f"name {LONG!r} is 64 bytes long: PostgreSQL would cut it to 63 (a table or column "
            "name of the materialized table must be shorter)"
        )
        assert stores.change_sink.last_batch_id("m") is None
    assert _tables(postgres_dsn) == before


def _tables(dsn: str) -> list[str]:
    """The tables of the test's schema."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1"
        ).fetchall()
    return [str(name) for (name,) in rows]
