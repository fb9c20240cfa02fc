"""A batch's messages of a key leave the table as applying them one by one does, on both backends.

The sink applies a batch's net effect per key, and decodes only the `after` rows that decide it
(the upserts since the key's last delete, of those only the last of each schema id). These are
the cases a wrong shortcut gets wrong: upserts of versions with other columns (the older one's
columns still count), the order they merge in, and deletes before, between and after upserts.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from cdc_support import history_of, keyed_message
from ordo.cdc import ChangeMessage, ChangeOp, Column, ColumnType, TableSchema
from ordo.cdc.message_rows import MessageRows
from ordo.cdc.mutation import JsonValue, Key
from ordo.storage.sql_change_sink import SqlChangeSink
from ordo.storage.stores import Stores

CURRENT = TableSchema(
    table="t",
    columns=(
        Column(name="id", type=ColumnType.LONG, nullable=False),
        Column(name="a", type=ColumnType.LONG),
        Column(name="b", type=ColumnType.LONG),
        Column(name="c", type=ColumnType.DOUBLE),
    ),
    partition_key=("id",),
)
"""The table's current version (schema id 3): it has the columns of both older versions."""
OLD, NEW = 1, 2
"""Schema ids of the versions (id, a, b) and (id, a, c), whose messages carry those columns."""


def _upsert(schema_id: int | None, key: int, n: int, *, columns: str = "") -> ChangeMessage:
    """An upsert of `key` setting every column of its version to `n` (`columns`: those only)."""
    shown = columns or {OLD: "ab", NEW: "ac", None: "abc"}[schema_id]
    after: dict[str, JsonValue] = {"id": key}
    after.update(dict.fromkeys(shown, n))
    return keyed_message("t", ChangeOp.UPDATE, key, None, after, schema_id=schema_id, at=n)


def _delete(key: int, schema_id: int = NEW) -> ChangeMessage:
    return keyed_message("t", ChangeOp.DELETE, key, None, None, schema_id=schema_id, at=0)


def _apply(sink: SqlChangeSink, materializer: str, batch_id: int, *messages: ChangeMessage) -> None:
    sink.apply_batch(
        materializer=materializer,
        query_id="q",
        batch_id=batch_id,
        target_table=materializer,
        messages=MessageRows.from_messages(messages),
        history=history_of(CURRENT),
    )


STARTING = (_upsert(None, 1, 9), _upsert(None, 3, 9))
"""The rows 1 and 3 before the batch: every column 9."""
CASES = {
    "an older version's columns count": (
        [_upsert(OLD, 1, 1), _upsert(NEW, 1, 2), _upsert(OLD, 2, 1), _upsert(NEW, 2, 2)],
        {1: (2, 1, 2), 2: (2, 1, 2), 3: (9, 9, 9)},
    ),
    "a newer version's columns count": (
        [_upsert(NEW, 2, 2), _upsert(OLD, 2, 1)],
        {1: (9, 9, 9), 2: (1, 1, 2), 3: (9, 9, 9)},
    ),
    "the last upsert of a version wins over an earlier other version": (
        [_upsert(OLD, 1, 1), _upsert(NEW, 1, 2), _upsert(OLD, 1, 3), _upsert(NEW, 3, 4)],
        {1: (3, 3, 2), 3: (4, 9, 4)},
    ),
    "a delete wipes the row before an upsert": (
        [_delete(1), _upsert(OLD, 1, 1)],
        {1: (1, 1, None), 3: (9, 9, 9)},
    ),
    "upserts before a delete do not count": (
        [_upsert(NEW, 1, 2), _upsert(OLD, 1, 1), _delete(1, OLD), _upsert(OLD, 1, 3)],
        {1: (3, 3, None), 3: (9, 9, 9)},
    ),
    "a delete last leaves no row": (
        [_upsert(OLD, 1, 1), _upsert(NEW, 1, 2), _delete(1, OLD), _upsert(OLD, 2, 1), _delete(2)],
        {3: (9, 9, 9)},
    ),
    "deletes between versions' upserts": (
        [
            _upsert(OLD, 3, 1),
            _delete(3),
            _upsert(NEW, 3, 2),
            _upsert(OLD, 3, 3),
            _delete(3, OLD),
            _upsert(NEW, 3, 4),
            _upsert(OLD, 3, 5),
            _upsert(NEW, 3, 6),
        ],
        {1: (9, 9, 9), 3: (6, 5, 6)},
    ),
    "upserts naming no schema id each count": (
        [_upsert(None, 1, 1), _upsert(None, 1, 2, columns="a"), _upsert(None, 3, 3, columns="b")],
        {1: (2, 1, 1), 3: (9, 3, 9)},
    ),
}


def _table(sink: SqlChangeSink, target: str) -> dict[Key, tuple[JsonValue, ...]]:
    rows = sink.read_table(target, CURRENT).items()
    return {key: (row["a"], row["b"], row["c"]) for key, row in rows}


@pytest.mark.parametrize(("batch", "expected"), CASES.values(), ids=CASES.keys())
def test_a_batch_leaves_the_table_as_its_messages_one_by_one_do(
    stores: Stores, batch: Sequence[ChangeMessage], expected: dict[int, tuple[int | None, ...]]
) -> None:
    sink = stores.change_sink
    for target in ("at_once", "one_by_one"):
        _apply(sink, target, 0, *STARTING)
    _apply(sink, "at_once", 1, *batch)
    for batch_id, message in enumerate(batch, start=1):
        _apply(sink, "one_by_one", batch_id, message)
    rows = {(key,): values for key, values in expected.items()}
    assert _table(sink, "one_by_one") == rows
    assert _table(sink, "at_once") == rows
