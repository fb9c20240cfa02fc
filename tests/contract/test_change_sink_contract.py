"""The materializer's sink on both backends: messages, the materialized table, replays."""

from __future__ import annotations

from typing import Any

from ordo.cdc import Audit, ChangeMessage, ChangeOp, Column, ColumnType, TableSchema
from ordo.cdc.message_rows import MessageRows
from ordo.storage.open import Stores

ID = Column(name="id", type=ColumnType.LONG, nullable=False)
V1 = TableSchema(
    table="odd table",
    columns=(
        ID,
        Column(name='say "hi"', type=ColumnType.STRING),
        Column(name="100%", type=ColumnType.DECIMAL),
        Column(name="ok", type=ColumnType.BOOLEAN),
        Column(name="doc", type=ColumnType.JSON),
        Column(name="raw", type=ColumnType.BYTES),
    ),
    partition_key=("id",),
)
V2 = TableSchema(
    table="odd table",
    columns=(*V1.columns, Column(name="note", type=ColumnType.STRING)),
    partition_key=("id",),
)
TARGET = 'odd "table"_materialized'


def _row(key: int, text: str, **more: Any) -> dict[str, Any]:
    return {
        "id": key,
        'say "hi"': text,
        "100%": "1.10",
        "ok": True,
        "doc": {"a": [1]},
        "raw": "00ff",
        **more,
    }


def _message(
    op: ChangeOp, key: int, before: dict[str, Any] | None, after: dict[str, Any] | None, sid: int
) -> ChangeMessage:
    return ChangeMessage(
        table="odd table",
        op=op,
        key=(key,),
        before=before,
        after=after,
        schema_id=sid,
        write_time=key,
        audit=Audit(source="test", position=key),
    )


def _table(stores: Stores) -> list[tuple[Any, ...]]:
    with stores.change_sink._db.connection() as conn:
        cursor = conn.execute('SELECT * FROM "odd ""table""_materialized" ORDER BY "id"')
        rows = cursor.fetchall()
        names = [d[0] for d in cursor.description]  # type: ignore[attr-defined]
    assert names[:6] == [c.name for c in V1.columns]
    return [tuple(row) for row in rows]


def test_a_batch_is_applied_once_with_its_messages_and_progress(stores: Stores) -> None:
    sink = stores.change_sink
    assert not sink.has_table(TARGET)  # created with the first messages
    a1, a2, b1 = _row(1, "a"), _row(1, "a2"), _row(2, "b")
    batch = [
        _message(ChangeOp.CREATE, 1, None, a1, 1),
        _message(ChangeOp.READ, 2, None, b1, 1),
        _message(ChangeOp.UPDATE, 1, a1, a2, 1),
    ]
    receipt = sink.apply_batch(
        materializer="m",
        batch_id=0,
        target_table=TARGET,
        messages=MessageRows.from_messages(batch),
        schemas={1: V1},
    )
    assert (receipt.is_applied, receipt.messages) == (True, 3)
    again = sink.apply_batch(
        materializer="m",
        batch_id=0,
        target_table=TARGET,
        messages=MessageRows.from_messages(batch),
        schemas={1: V1},
    )
    assert not again.is_applied
    assert sink.has_table(TARGET)
    rows = _table(stores)
    assert [row[:3] for row in rows] == [(1, "a2", rows[0][2]), (2, "b", rows[1][2])]
    assert str(rows[0][2]) == "1.10"
    assert bytes(rows[0][5]) == b"\x00\xff"
    assert sink.last_batch_id("m") == 0
    assert [(p.materializer, p.batch_id, p.messages) for p in sink.progress()] == [("m", 0, 3)]


def test_deletes_and_a_new_nullable_column_apply_in_order(stores: Stores) -> None:
    sink = stores.change_sink
    a, b = _row(1, "a"), _row(2, "b")
    sink.apply_batch(
        materializer="m",
        batch_id=3,
        target_table=TARGET,
        messages=MessageRows.from_messages(
            [
                _message(ChangeOp.CREATE, 1, None, a, 1),
                _message(ChangeOp.CREATE, 2, None, b, 1),
            ]
        ),
        schemas={1: V1},
    )
    a_v2 = {**a, "note": "n"}
    sink.apply_batch(
        materializer="m",
        batch_id=4,
        target_table=TARGET,
        messages=MessageRows.from_messages(
            [
                _message(ChangeOp.DELETE, 2, b, None, 1),
                _message(ChangeOp.CREATE, 2, None, _row(2, "again"), 1),  # back with old columns
                _message(ChangeOp.UPDATE, 1, {**a, "note": None}, a_v2, 2),
            ]
        ),
        schemas={1: V1, 2: V2},
    )
    rows = _table(stores)
    assert [(row[0], row[1], row[-1]) for row in rows] == [(1, "a", "n"), (2, "again", None)]
    assert sink.last_batch_id("m") == 4
