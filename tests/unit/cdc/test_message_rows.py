"""Messages as sink rows: the JSON texts the stateful step writes, in emission order."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdc_support import COLUMNS, accepted_catalog, mutations
from ordo.cdc import (
    Audit,
    ChangeMessage,
    ChangeOp,
    Column,
    ColumnType,
    JsonValue,
    Mutation,
    PartitionState,
    TableSchema,
)
from ordo.cdc.materializer import materialize_partition
from ordo.cdc.message_rows import (
    MESSAGE_ROW_COLUMNS,
    MessageRows,
    fold_message_values,
    message_values,
)

ROWS = accepted_catalog(
    TableSchema(
        table="t",
        columns=(
            Column(name="p", type=ColumnType.LONG, nullable=False),
            Column(name="k", type=ColumnType.LONG, nullable=False),
            *(Column(name=name, type=ColumnType.JSON) for name in COLUMNS),
        ),
        partition_key=("p",),
        clustering_key=("k",),
    )
)
"""Table `t` of `cdc_support.mutations`, with one clustering column."""


def test_messages_become_compact_json_rows_in_order() -> None:
    audit = Audit(source="s", replica="r", segment="g", position=7)
    row: dict[str, JsonValue] = {"id": 1, "x": 1.5}
    messages = [
        ChangeMessage(
            table="t",
            op=op,
            key=(1, "é"),
            before=before,
            after=after,
            schema_id=3,
            write_time=9,
            audit=audit,
        )
        for op, before, after in (
            (ChangeOp.CREATE, None, row),
            (ChangeOp.DELETE, row, None),
        )
    ]
    rows = MessageRows.from_messages(messages)
    assert len(rows) == 2
    assert rows.column("key_json") == ['[1,"\\u00e9"]'] * 2
    assert rows.column("op") == ["create", "delete"]
    assert rows.column("after_json") == ['{"id":1,"x":1.5}', None]
    assert [json.loads(t) if t else t for t in rows.column("before_json")] == [
        None,
        {"id": 1, "x": 1.5},
    ]
    assert rows.column("position") == [7, 7]


def test_rows_must_have_every_column_of_one_length() -> None:
    with pytest.raises(ValueError, match="one length"):
        MessageRows({**{name: [] for name in MESSAGE_ROW_COLUMNS}, "op": ["create"]})
    with pytest.raises(ValueError, match="columns"):
        MessageRows({name: [] for name in MESSAGE_ROW_COLUMNS[1:]})
    assert len(MessageRows.from_messages([])) == 0


@given(st.lists(mutations(), max_size=12))
def test_a_folds_messages_have_the_texts_of_each_message_alone(batch: list[Mutation]) -> None:
    """Rows updated, deleted and written again, a partition deleted: reused texts or not."""
    batch = [m for m in batch if len(m.clustering_key) == 1 or m.partition_deleted_at is not None]
    messages = materialize_partition(PartitionState(), batch, ROWS.resolve).messages

    assert list(fold_message_values(messages)) == [message_values(m) for m in messages]


def test_a_before_equal_to_the_previous_after_in_other_types_keeps_its_own_text() -> None:
    """x 1.0 equals the previous after's x 1 but is written "1.0": texts are reused only for
    the very same objects (a retyped column or another schema version makes such a before)."""
    audit = Audit(source="s")
    created: dict[str, JsonValue] = {"id": 1, "x": 1}
    before: dict[str, JsonValue] = {"id": 1, "x": 1.0}
    updated: dict[str, JsonValue] = {"id": 1, "x": 2.5}
    messages = [
        ChangeMessage(
            table="t",
            op=op,
            key=(1,),
            before=before,
            after=after,
            schema_id=schema_id,
            write_time=schema_id,
            audit=audit,
        )
        for op, before, after, schema_id in (
            (ChangeOp.CREATE, None, created, 1),
            (ChangeOp.UPDATE, before, updated, 2),
        )
    ]
    assert list(fold_message_values(messages)) == [message_values(m) for m in messages]
