"""Decimal and timestamp keys on both backends: a row per key the fold keeps apart (G6).

The fold keys rows by their key's JSON text, so one moment or number written in several text
forms is several rows, as an SQLite source (which compares them as text) or an ingested log has
them. PostgreSQL's TIMESTAMP WITH TIME ZONE and NUMERIC key columns made them one row, which a
delete of any of them emptied; the sink keeps such keys as their text on both backends.
"""

from __future__ import annotations

from functools import partial

import psycopg
import pytest

from cdc_support import apply_in_schema, row_message
from ordo.cdc import ChangeOp, Column, ColumnType, TableSchema
from ordo.errors import MaterializedKeyChangeError
from ordo.storage.open import stores_at
from ordo.storage.sql_change_sink import SqlChangeSink
from ordo.storage.stores import Stores

TARGET = "things"
QUERY = "3f5e0d1c-0000-4000-8000-000000000003"
STAMPS = ("2026-01-01 00:00:00", "2026-01-01T00:00:00", "2026-01-01T01:00:00+01:00")
"""One moment (read as UTC where it has no zone) in three text forms: three keys."""
AMOUNTS = ("1", "1.0", "1e0")
"""One number in three text forms: three keys."""


def _things(key: str, key_type: ColumnType = ColumnType.TIMESTAMP) -> TableSchema:
    """Table `things` (k of `key_type`, a timestamp `at`, a long `n`) keyed by `key`."""
    columns = (
        Column(name="k", type=key_type, nullable=key != "k"),
        Column(name="at", type=ColumnType.TIMESTAMP, nullable=key != "at"),
        Column(name="n", type=ColumnType.LONG),
    )
    return TableSchema(table="things", columns=columns, partition_key=(key,))


_message = partial(row_message, table="things")
_apply = partial(apply_in_schema, query_id=QUERY, target_table=TARGET)


def _sql_types(sink: SqlChangeSink) -> dict[str, str]:
    """The table's columns' SQL types as the database lists them, lower case."""
    with sink._db.connection() as conn:
        rows = conn.execute(sink._sql(sink.TABLE_COLUMNS), (TARGET,)).fetchall()
    return {str(name): str(sql_type).casefold() for name, sql_type, _ in rows}


def _expected_types(sink: SqlChangeSink, *, key: str) -> dict[str, str]:
    """`key` as text (a timestamp's or decimal's SQL type is text on SQLite too), the rest in
    their own SQL types: the value columns keep PostgreSQL's native types."""
    types = {"k": ColumnType.TIMESTAMP, "at": ColumnType.TIMESTAMP, "n": ColumnType.LONG}
    types[key] = ColumnType.STRING
    return {name: sink.COLUMN_TYPES[t].casefold() for name, t in types.items()}


@pytest.mark.parametrize(
    ("key_type", "forms"),
    [(ColumnType.TIMESTAMP, STAMPS), (ColumnType.DECIMAL, AMOUNTS)],
    ids=["timestamp", "decimal"],
)
def test_key_texts_of_one_value_are_rows_of_their_own(
    stores: Stores, key_type: ColumnType, forms: tuple[str, ...]
) -> None:
    """Three rows, each updated and deleted alone, their keys read back as written. On
    PostgreSQL they were one row (the last written), and deleting one emptied the table."""
    sink, schema = stores.change_sink, _things("k", key_type)
    rows = [{"k": k, "at": STAMPS[0], "n": n} for n, k in enumerate(forms)]
    _apply(sink, 0, [_message(ChangeOp.CREATE, schema, row) for row in rows], schema)
    assert sorted(sink.read_table(TARGET, schema)) == sorted((k,) for k in forms)

    updated = {**rows[1], "n": 11}
    batch = [
        _message(ChangeOp.UPDATE, schema, updated, before=True),
        _message(ChangeOp.DELETE, schema, rows[2]),
    ]
    assert _apply(sink, 1, batch, schema).is_applied

    table = sink.read_table(TARGET, schema)
    assert {key: row["n"] for key, row in table.items()} == {(forms[0],): 0, (forms[1],): 11}
    assert [row["k"] for row in table.values()] == [key for (key,) in table]
    assert _sql_types(sink) == _expected_types(sink, key="k")


def test_a_timestamp_column_becoming_the_key_is_stored_as_text_and_as_a_value_again_after(
    stores: Stores,
) -> None:
    """An empty table takes the new key: its column changes to text with it, and back to the
    timestamp's SQL type when it leaves the key."""
    sink = stores.change_sink
    by_k, by_at = _things("k"), _things("at")
    first = {"k": STAMPS[0], "at": STAMPS[0], "n": 0}
    _apply(sink, 0, [_message(ChangeOp.CREATE, by_k, first)], by_k)
    _apply(sink, 1, [_message(ChangeOp.DELETE, by_k, first)], by_k)

    rows = [{"at": at, "n": n} for n, at in enumerate(STAMPS)]
    creates = [_message(ChangeOp.CREATE, by_at, row, schema_id=2) for row in rows]
    assert _apply(sink, 2, creates, by_at, old_key_ids={1}).is_applied

    assert _sql_types(sink) == _expected_types(sink, key="at")
    assert sorted(sink.read_table(TARGET, by_at)) == sorted((at,) for at in STAMPS)
    deletes = [_message(ChangeOp.DELETE, by_at, row, schema_id=2) for row in rows]
    _apply(sink, 3, deletes, by_at, old_key_ids={1})
    again = {"k": STAMPS[1], "at": STAMPS[2], "n": 3}
    assert _apply(
        sink, 4, [_message(ChangeOp.CREATE, by_k, again, schema_id=3)], by_k, old_key_ids={2}
    )
    assert _sql_types(sink) == _expected_types(sink, key="k")
    assert list(sink.read_table(TARGET, by_k)) == [(STAMPS[1],)]


def test_a_retyped_value_column_is_converted_row_by_row_by_its_keys_text(stores: Stores) -> None:
    """The converted values are written back by key: by each key's text, which the key column
    holds (a timestamp parameter was no key of a text column)."""
    sink, schema = stores.change_sink, _things("k")
    rows = [{"k": k, "n": n} for n, k in enumerate(STAMPS)]
    _apply(sink, 0, [_message(ChangeOp.CREATE, schema, row) for row in rows], schema)
    retyped = TableSchema(
        table="things",
        columns=(*schema.columns[:2], Column(name="n", type=ColumnType.STRING)),
        partition_key=("k",),
    )

    batch = [_message(ChangeOp.CREATE, retyped, {"k": "2026-01-02", "n": "x"})]
    assert _apply(sink, 1, batch, retyped, former_types={"n": (ColumnType.LONG,)}).is_applied

    table = sink.read_table(TARGET, retyped)
    assert {key: row["n"] for key, row in table.items()} == {
        **{(k,): str(n) for n, k in enumerate(STAMPS)},
        ("2026-01-02",): "x",
    }


OLD_TABLE = (
    "CREATE TABLE things (k TIMESTAMP WITH TIME ZONE NOT NULL, at TIMESTAMP WITH TIME ZONE, "
    "n BIGINT, PRIMARY KEY (k))"
)
"""The table an ordo before text keys created for `_things("k")` on PostgreSQL."""


@pytest.mark.postgres
def test_an_older_empty_table_takes_its_timestamp_key_as_text(postgres_dsn: str) -> None:
    schema = _things("k")
    with stores_at(postgres_dsn) as stores, psycopg.connect(postgres_dsn) as conn:
        conn.execute(OLD_TABLE)
        conn.commit()
        rows = [{"k": k, "n": n} for n, k in enumerate(STAMPS)]
        _apply(stores.change_sink, 0, [_message(ChangeOp.CREATE, schema, r) for r in rows], schema)

        assert sorted(stores.change_sink.read_table(TARGET, schema)) == sorted((k,) for k in STAMPS)
        assert _sql_types(stores.change_sink)["k"] == "text"


@pytest.mark.postgres
def test_an_older_table_with_rows_keyed_by_timestamp_values_is_refused(postgres_dsn: str) -> None:
    """Its rows' keys are values, whose text is not the key they were written with: the table
    is materialized afresh, as after a key change, rather than applied to (which kept folding
    keys together)."""
    schema = _things("k")
    with stores_at(postgres_dsn) as stores, psycopg.connect(postgres_dsn) as conn:
        conn.execute(OLD_TABLE)
        conn.execute("INSERT INTO things VALUES ('2026-01-01 00:00:00+00', NULL, 0)")
        conn.commit()
        batch = [_message(ChangeOp.CREATE, schema, {"k": STAMPS[1], "n": 1})]

        with pytest.raises(MaterializedKeyChangeError) as refused:
            _apply(stores.change_sink, 0, batch, schema)

        assert str(refused.value).startswith(
            "materialized table 'things' holds rows keyed by ('k',), the table's current schema "
            "is keyed by ('k',) (column 'k' stored as timestamp values, not as the text of its "
            "keys): "
        )
        assert stores.change_sink.last_batch_id("m") is None
        assert _sql_types(stores.change_sink)["k"] == "timestamp with time zone"
