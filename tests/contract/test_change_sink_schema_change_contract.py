"""The materialized table after an accepted retype or key change, on both backends."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import pytest

from cdc_support import apply_as_m, apply_in_schema, row_message
from ordo.cdc import ChangeOp, Column, ColumnType, TableSchema
from ordo.cdc.schema_registry import SchemaRegistry
from ordo.errors import (
    IncompatibleSchemaError,
    MaterializedKeyChangeError,
    MaterializedRetypeError,
    OldKeyMessageError,
    UnconvertibleValueError,
)
from ordo.storage.sql_change_sink import ChangeBatchReceipt, SqlChangeSink
from ordo.storage.stores import Stores


def _items(n: ColumnType, m: ColumnType) -> TableSchema:
    """Table `items` keyed by `id`, with `n` and `m 100%` of the given types."""
    columns = (
        Column(name="id", type=ColumnType.LONG, nullable=False),
        Column(name="n", type=n),
        Column(name="s", type=ColumnType.STRING),
        Column(name="m 100%", type=m),
    )
    return TableSchema(table="items", columns=columns, partition_key=("id",))


V1 = _items(ColumnType.LONG, ColumnType.STRING)
V2 = _items(ColumnType.STRING, ColumnType.DOUBLE)
"""V1 with `n` retyped long -> string and `m 100%` string -> double."""
V2_FORMER = {"n": (ColumnType.LONG,), "m 100%": (ColumnType.STRING,)}
TARGET = 'odd "items"'
QUERY = "3f5e0d1c-0000-4000-8000-000000000002"


_message = partial(row_message, table="items")
_apply = partial(apply_in_schema, query_id=QUERY, target_table=TARGET)


def _create(sink: SqlChangeSink, *rows: Mapping[str, Any]) -> None:
    """Batch 0: the table under V1 with `rows`."""
    _apply(sink, 0, [_message(ChangeOp.CREATE, V1, row) for row in rows], V1)


def _columns(sink: SqlChangeSink) -> list[str]:
    with sink._db.connection() as conn:
        cursor = conn.execute('SELECT * FROM "odd ""items""" WHERE false')
        assert cursor.description is not None  # a SELECT has columns
        return [d[0] for d in cursor.description]


def test_an_accepted_retype_converts_the_column_in_the_batchs_transaction(stores: Stores) -> None:
    """The column takes its new SQL type (no affinity or cast turns "007" into 7 any more), and
    the rows written before keep their values in the new type. A column added by hand stays."""
    sink = stores.change_sink
    _create(sink, {"id": 1, "n": 5, "s": "a", "m 100%": "1.5"}, {"id": 2, "s": "b"})
    with sink._db.write_transaction() as conn:
        conn.execute('ALTER TABLE "odd ""items""" ADD COLUMN loaded_by TEXT', ())
        conn.execute('UPDATE "odd ""items""" SET loaded_by = \'me\'', ())
    row = {"id": 3, "n": "007", "s": "c", "m 100%": 2.5}

    assert _apply(sink, 1, [_message(ChangeOp.CREATE, V2, row)], V2, V2_FORMER).is_applied

    assert sink.read_table(TARGET, V2) == {
        (1,): {"id": 1, "n": "5", "s": "a", "m 100%": 1.5},
        (2,): {"id": 2, "n": None, "s": "b", "m 100%": None},
        (3,): row,
    }
    assert _columns(sink) == [*V2.names, "loaded_by"]
    with sink._db.connection() as conn:
        assert conn.execute('SELECT loaded_by FROM "odd ""items""" WHERE id = 1').fetchall() == [
            ("me",)
        ]
    later = {**row, "n": "8", "m 100%": 3}
    assert _apply(sink, 2, [_message(ChangeOp.UPDATE, V2, later, before=True)], V2, V2_FORMER)
    assert sink.read_table(TARGET, V2)[(3,)] == {**later, "m 100%": 3.0}


def test_a_retype_a_row_cannot_take_is_refused_and_changes_nothing(stores: Stores) -> None:
    """Refused naming the table, column, types, row and value; once the operator fixes the
    row, the materializer's next attempt applies the batch."""
    sink = stores.change_sink
    _create(sink, {"id": 1, "m 100%": "1.5"}, {"id": 2, "m 100%": "abc"})
    batch = [_message(ChangeOp.CREATE, V2, {"id": 3, "m 100%": 2.5})]

    with pytest.raises(MaterializedRetypeError) as refused:
        _apply(sink, 1, batch, V2, V2_FORMER)

    assert str(refused.value) == (
        "materialized table 'odd \"items\"': column 'm 100%' cannot be retyped string -> "
        "double: the row with key (2,) holds 'abc', which is not a double; nothing was "
        "applied. Correct or clear that value in the table and run the materializer again, "
        "or materialize into another --target-table (see docs/cdc.md, 'Schemas')"
    )
    assert (refused.value.table, refused.value.column, refused.value.key) == (
        TARGET,
        "m 100%",
        (2,),
    )
    assert sink.last_batch_id("m") == 0
    assert sink.read_table(TARGET, V1) == {
        (1,): {"id": 1, "n": None, "s": None, "m 100%": "1.5"},
        (2,): {"id": 2, "n": None, "s": None, "m 100%": "abc"},
    }
    with sink._db.write_transaction() as conn:
        conn.execute('UPDATE "odd ""items""" SET "m 100%" = NULL WHERE id = 2')
    assert _apply(sink, 1, batch, V2, V2_FORMER).is_applied
    rows = sorted(sink.read_table(TARGET, V2).items())
    assert [row["m 100%"] for _, row in rows] == [1.5, None, 2.5]


def test_a_message_of_the_older_version_is_written_in_the_current_types(stores: Stores) -> None:
    """A late change naming version 1 after the retype: its values convert as the rows' do, or
    the batch is refused naming the value (PostgreSQL refused 'abc' for a double with a driver
    error; SQLite stored it in the REAL column)."""
    sink = stores.change_sink
    _create(sink, {"id": 1, "n": 5})
    late = {"id": 2, "n": 7, "s": "b", "m 100%": "2.5"}
    assert _apply(sink, 1, [_message(ChangeOp.CREATE, V1, late)], V2, V2_FORMER).is_applied
    assert sink.read_table(TARGET, V2)[(2,)] == {"id": 2, "n": "7", "s": "b", "m 100%": 2.5}

    bad = _message(ChangeOp.UPDATE, V1, {**late, "m 100%": "abc"}, before=True)
    with pytest.raises(UnconvertibleValueError) as refused:
        _apply(sink, 2, [bad], V2, V2_FORMER)

    assert (refused.value.column, refused.value.key, refused.value.value) == (
        "m 100%",
        (2,),
        "abc",
    )
    assert sink.last_batch_id("m") == 1
    assert sink.read_table(TARGET, V2)[(2,)]["m 100%"] == 2.5


KEYED_BY_ID_AND_S = TableSchema(table="items", columns=V1.columns, partition_key=("id", "s"))
ID_AS_TEXT = TableSchema(
    table="items",
    columns=(Column(name="id", type=ColumnType.STRING, nullable=False), *V1.columns[1:]),
    partition_key=("id",),
)


@pytest.mark.parametrize(
    ("schema", "former_types", "keys"),
    [
        (KEYED_BY_ID_AND_S, {}, "('id', 's')"),
        (ID_AS_TEXT, {"id": (ColumnType.LONG,)}, "('id',) (column 'id' retyped long -> string)"),
    ],
    ids=["new key", "retyped key column"],
)
def test_a_key_change_of_a_table_with_rows_is_refused_and_changes_nothing(
    stores: Stores,
    schema: TableSchema,
    former_types: Mapping[str, Sequence[ColumnType]],
    keys: str,
) -> None:
    """The rows are keyed by the old key, the fold state and every later message by the new."""
    sink = stores.change_sink
    _create(sink, {"id": 1, "s": "a"})
    batch = [_message(ChangeOp.CREATE, schema, {"id": 1 if schema is not ID_AS_TEXT else "2"})]

    with pytest.raises(MaterializedKeyChangeError) as refused:
        _apply(sink, 1, batch, schema, former_types)

    assert str(refused.value).startswith(
        f"materialized table 'odd \"items\"' holds rows keyed by ('id',), the table's current "
        f"schema is keyed by {keys}: "
    )
    assert sink.last_batch_id("m") == 0
    assert sink.read_table(TARGET, V1) == {(1,): {"id": 1, "n": None, "s": "a", "m 100%": None}}


def test_an_empty_table_takes_the_new_key(stores: Stores) -> None:
    sink = stores.change_sink
    _create(sink, {"id": 1, "s": "a"})
    _apply(sink, 1, [_message(ChangeOp.DELETE, V1, {"id": 1, "s": "a"})], V1)
    rows = [{"id": 1, "s": "a", "n": 1}, {"id": 1, "s": "b", "n": 2}]

    batch = [_message(ChangeOp.CREATE, KEYED_BY_ID_AND_S, row) for row in rows]
    assert _apply(sink, 2, batch, KEYED_BY_ID_AND_S).is_applied

    assert sorted(sink.read_table(TARGET, KEYED_BY_ID_AND_S)) == [(1, "a"), (1, "b")]
    update = {"id": 1, "s": "b", "n": 3}
    _apply(sink, 3, [_message(ChangeOp.UPDATE, KEYED_BY_ID_AND_S, update)], KEYED_BY_ID_AND_S)
    assert sink.read_table(TARGET, KEYED_BY_ID_AND_S)[(1, "b")]["n"] == 3


KEYED_BY_NEW_COLUMN = TableSchema(
    table="items",
    columns=(*V1.columns, Column(name="at", type=ColumnType.TIMESTAMP, nullable=False)),
    partition_key=("id", "at"),
)
"""V1 with a timestamp `at` added and made part of the key: a key naming a column the table
does not have yet."""


def test_an_empty_table_takes_a_new_key_naming_a_column_the_version_adds(
    stores: Stores,
) -> None:
    """The column is added before the key is made of it (re-keying first failed on both
    backends, naming a column the table did not have), as text like any timestamp key."""
    sink = stores.change_sink
    _create(sink, {"id": 1, "s": "a"})
    _apply(sink, 1, [_message(ChangeOp.DELETE, V1, {"id": 1, "s": "a"})], V1)
    rows = [{"id": 1, "at": "2026-01-01T00:00:00", "n": 1}, {"id": 1, "at": "2026-01-01", "n": 2}]

    batch = [_message(ChangeOp.CREATE, KEYED_BY_NEW_COLUMN, row, schema_id=2) for row in rows]
    assert _apply(sink, 2, batch, KEYED_BY_NEW_COLUMN, old_key_ids={1}).is_applied

    table = sink.read_table(TARGET, KEYED_BY_NEW_COLUMN)
    assert {key: row["n"] for key, row in table.items()} == {
        (1, "2026-01-01T00:00:00"): 1,
        (1, "2026-01-01"): 2,
    }
    assert _columns(sink) == ["id", "n", "s", "m 100%", "at"]


KEYED_BY_S = TableSchema(table="items", columns=V1.columns, partition_key=("s",))
"""Keyed by as many columns as V1: the old key's values fit the new key's columns."""


@pytest.mark.parametrize("op", [ChangeOp.DELETE, ChangeOp.UPDATE])
@pytest.mark.parametrize(
    ("schema", "former_types", "id_type"),
    [
        (KEYED_BY_ID_AND_S, {}, int),
        (KEYED_BY_S, {}, int),
        (ID_AS_TEXT, {"id": (ColumnType.LONG,)}, str),
    ],
    ids=["wider key", "same width", "retyped key column"],
)
def test_a_message_keyed_by_the_old_key_is_refused_before_anything_is_applied(
    stores: Stores,
    op: ChangeOp,
    schema: TableSchema,
    former_types: Mapping[str, Sequence[ColumnType]],
    id_type: type[int | str],
) -> None:
    """A message naming a version before the key change (schema id 1): was a bare ValueError
    or a silent upsert, and by the same number of columns applied by the wrong ones."""
    sink = stores.change_sink
    _create(sink, {"id": 1, "s": "a"})
    _apply(sink, 1, [_message(ChangeOp.DELETE, V1, {"id": 1, "s": "a"})], V1)
    row = {"id": id_type(1), "s": "b", "n": 2}
    first = [_message(ChangeOp.CREATE, schema, row, schema_id=2)]
    _apply(sink, 2, first, schema, former_types, old_key_ids={1})
    batch = [
        _message(ChangeOp.CREATE, schema, {"id": id_type(2), "s": "c"}, schema_id=2),
        _message(op, V1, {"id": 1, "s": "b", "n": 3}, before=True),
    ]

    with pytest.raises(OldKeyMessageError) as refused:
        _apply(sink, 3, batch, schema, former_types, old_key_ids={1})

    assert str(refused.value) == (
        "materialized table 'odd \"items\"': a message of schema id 1 is keyed by (1,), the "
        f"table's current schema by {schema.primary_key}: it was written before a key change, "
        "and no row of the table is keyed so; nothing was applied. Materialize the table afresh "
        "from a change log that starts with the new key (see docs/cdc.md, 'Schemas')"
    )
    assert (refused.value.schema_id, refused.value.key) == (1, (1,))
    assert sink.last_batch_id("m") == 2
    assert sink.read_table(TARGET, schema) == {
        tuple(row[k] for k in schema.primary_key): {**row, "m 100%": None}
    }


def test_a_replayed_batch_is_skipped_though_its_messages_name_an_old_key(stores: Stores) -> None:
    """A batch applied before the key change and replayed after it (a restart) changes nothing
    and is not refused: the progress decides first, so the outcome does not depend on when the
    operator accepted the change."""
    sink = stores.change_sink
    _create(sink, {"id": 1, "s": "a"})

    replayed = _apply(
        sink, 0, [_message(ChangeOp.CREATE, V1, {"id": 1, "s": "a"})], KEYED_BY_S, old_key_ids={1}
    )

    assert replayed == ChangeBatchReceipt(is_applied=False, messages=0)
    assert sink.read_table(TARGET, V1) == {(1,): {"id": 1, "n": None, "s": "a", "m 100%": None}}


def test_the_registrys_history_refuses_a_message_of_a_wider_old_key(stores: Stores) -> None:
    """The sink takes the table's history whole, as the registry derives it, so no caller can
    leave out the old keys: a delete keyed by (id, s) of the version before the key change was
    a bare ValueError for a caller that did, and is refused by its schema id."""
    registry = SchemaRegistry(stores.schemas)
    wide = registry.register(KEYED_BY_ID_AND_S)
    with pytest.raises(IncompatibleSchemaError) as pending:
        registry.register(V1)
    registry.accept("items", pending.value.version)
    batch = [
        _message(ChangeOp.CREATE, V1, {"id": 2, "s": "b"}, schema_id=wide.schema_id + 1),
        _message(ChangeOp.DELETE, KEYED_BY_ID_AND_S, {"id": 1, "s": "a"}, schema_id=wide.schema_id),
    ]

    with pytest.raises(OldKeyMessageError) as refused:
        apply_as_m(
            stores.change_sink,
            0,
            batch,
            registry.history("items"),
            query_id=QUERY,
            target_table=TARGET,
        )

    assert (refused.value.schema_id, refused.value.key) == (wide.schema_id, (1, "a"))
    assert stores.change_sink.last_batch_id("m") is None
    assert not stores.change_sink.has_table(TARGET)
