"""The materializer's stateful step without Spark: one batch's messages as the sink stores them.

The step reuses a text it encoded already where a message repeats it (a row's key, and its
`before`, the previous message's `after`): these tests pin the texts to what encoding each
message alone gives, also where the previous `after` and the `before` differ in their text only.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pandas as pd  # type: ignore[import-untyped]  # pandas ships no type hints
import pytest

from bucket_state_doubles import FakeHandle
from cdc_support import USERS
from ordo.cdc import (
    Audit,
    Cell,
    Column,
    ColumnType,
    JsonValue,
    Mutation,
    SchemaRegistry,
    TableSchema,
)
from ordo.cdc.change_rows import ChangeRows
from ordo.errors import IncompatibleSchemaError
from ordo.spark.change_processor import BIGINT_COLUMNS, INPUT_COLUMNS, ChangeFoldProcessor
from ordo.storage.open import stores_at

AGE_AS_DOUBLE = TableSchema(
    table="users",
    columns=(*USERS.columns[:2], Column(name="age", type=ColumnType.DOUBLE)),
    partition_key=("id",),
)


def _audit(time: int) -> Audit:
    return Audit(source="cassandra", replica="10.0.0.1", segment="CommitLog-1", position=time)


def _write(
    key: int, time: int, schema_id: int, *, insert: bool = False, **cells: JsonValue
) -> Mutation:
    return Mutation(
        table="users",
        partition_key=(key,),
        cells={name: Cell(value=value, write_time=time) for name, value in cells.items()},
        liveness=Cell(value=True, write_time=time) if insert else None,
        schema_id=schema_id,
        audit=_audit(time),
    )


def _delete(key: int, time: int, schema_id: int) -> Mutation:
    return Mutation(
        table="users",
        partition_key=(key,),
        row_deleted_at=time,
        schema_id=schema_id,
        audit=_audit(time),
    )


def _output(sink: str, rows: ChangeRows) -> pd.DataFrame:
    """The step's output frame of one batch of `rows`."""
    columns = {name: list(rows.column(name)) for name in INPUT_COLUMNS}
    for name in BIGINT_COLUMNS:  # as the materializer hands them over: pandas would round them
        columns[name] = [None if value is None else str(value) for value in columns[name]]
    processor = ChangeFoldProcessor(sink=sink, table="users")
    processor.init(FakeHandle())  # type: ignore[arg-type]
    frame = pd.DataFrame(columns, dtype=object)
    (output,) = processor.handleInputRows((0,), iter([frame]), None)  # type: ignore[arg-type]
    return output


def _step(sink: str, mutations: list[Mutation]) -> list[tuple[Any, ...]]:
    """One batch of `mutations`, and another replica's copy of each, through the step.

    Per message: its partition key, op, key, `before` and `after` texts and schema id.
    """
    copies = [
        dataclasses.replace(m, audit=dataclasses.replace(m.audit, replica="10.0.0.2"))
        for m in mutations
    ]
    output = _output(sink, ChangeRows.from_mutations([*mutations, *copies]))
    assert output["dead_letter_reason"].isna().all()
    names = ["partition_key", "op", "key_json", "before_json", "after_json", "schema_id"]
    return [tuple(row) for row in output[names].itertuples(index=False)]


@pytest.fixture
def sink(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'sink.db'}"


def test_a_rows_updates_and_a_delete_in_one_batch_have_every_text_of_its_own(sink: str) -> None:
    with stores_at(sink) as stores:
        v1 = SchemaRegistry(stores.schemas).register(USERS).schema_id
    messages = _step(
        sink,
        [
            _write(1, 10, v1, insert=True, name="Ada", age=37),
            _write(2, 11, v1, insert=True, name="Bo"),
            _write(1, 20, v1, name="Ada Lovelace"),
            _write(2, 21, v1, age=1),
            _write(1, 30, v1, age=38),
            _delete(1, 40, v1),
            _write(1, 50, v1, insert=True, name="Cy"),
            _write(1, 60, v1, age=39),
        ],
    )

    ada = '{"id":1,"name":"Ada","age":37}'
    lovelace = '{"id":1,"name":"Ada Lovelace","age":37}'
    older = '{"id":1,"name":"Ada Lovelace","age":38}'
    cy = '{"id":1,"name":"Cy","age":null}'
    bo = '{"id":2,"name":"Bo","age":null}'
    assert messages == [
        ("[1]", "create", "[1]", None, ada, v1),
        ("[1]", "update", "[1]", ada, lovelace, v1),
        ("[1]", "update", "[1]", lovelace, older, v1),
        ("[1]", "delete", "[1]", older, None, v1),
        ("[1]", "create", "[1]", None, cy, v1),
        ("[1]", "update", "[1]", cy, '{"id":1,"name":"Cy","age":39}', v1),
        ("[2]", "create", "[2]", None, bo, v1),
        ("[2]", "update", "[2]", bo, '{"id":2,"name":"Bo","age":1}', v1),
    ]


def test_a_before_equal_to_the_previous_after_in_another_type_has_its_own_text(
    sink: str,
) -> None:
    """Version 1 types `age` double, version 2 (an accepted retype) long: the message of a write
    naming version 2 shows the cell written as 37.0 as 37, which the previous `after` (of
    version 1) holds as 37.0 (equal numbers, other texts), and back."""
    with stores_at(sink) as stores:
        registry = SchemaRegistry(stores.schemas)
        v1 = registry.register(AGE_AS_DOUBLE).schema_id
        with pytest.raises(IncompatibleSchemaError):
            registry.register(USERS)
        v2 = registry.accept("users", 2).schema_id
    messages = _step(
        sink,
        [
            _write(1, 10, v1, insert=True, name="Ada", age=37.0),
            _write(1, 20, v2, name="Bo"),
            _write(1, 30, v1, name="Cy"),
        ],
    )

    assert [(before, after) for _, _, _, before, after, _ in messages] == [
        (None, '{"id":1,"name":"Ada","age":37.0}'),
        ('{"id":1,"name":"Ada","age":37}', '{"id":1,"name":"Bo","age":37}'),
        ('{"id":1,"name":"Bo","age":37.0}', '{"id":1,"name":"Cy","age":37.0}'),
    ]
    assert [schema_id for *_, schema_id in messages] == [v1, v2, v1]


def test_an_unreadable_row_is_a_dead_letter_holding_the_row_as_read(sink: str) -> None:
    with stores_at(sink) as stores:
        v1 = SchemaRegistry(stores.schemas).register(USERS).schema_id
    rows = ChangeRows.from_mutations([_write(1, 10, v1, insert=True, name="Ada")])
    output = _output(sink, rows.replaced("cell_values", ['{"name": NaN}']))

    (letter,) = output.itertuples(index=False)
    assert letter.dead_letter_reason.startswith("unreadable mutation: NaN is not a JSON number")
    read = json.loads(letter.mutation_json)
    assert read["cell_values"] == '{"name": NaN}'
    assert (read["position"], read["segment"]) == ("10", "CommitLog-1")
