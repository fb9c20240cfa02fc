"""The fold emits full before/after rows, only for real changes."""

from __future__ import annotations

from itertools import pairwise

from cdc_support import USERS as SCHEMA
from ordo.cdc import (
    Audit,
    Cell,
    ChangeOp,
    Mutation,
    PartitionState,
    fold,
    mutation_problems,
)


def _mutation(ts: int, *, insert: bool = False, delete: bool = False, **values: object) -> Mutation:
    return Mutation(
        table="users",
        partition_key=(1,),
        cells={k: Cell(value=v, write_time=ts) for k, v in values.items()},  # type: ignore[arg-type]
        liveness=Cell(value=True, write_time=ts) if insert else None,
        row_deleted_at=ts if delete else None,
        schema_id=3,
        audit=Audit(source="test", position=ts),
    )


def test_create_update_delete_carry_full_rows_chained_by_before_and_after() -> None:
    state = PartitionState()
    emitted = []
    for mutation in (
        _mutation(1, insert=True, name="ada", age=36),
        _mutation(2, age=37),
        _mutation(3, delete=True),
    ):
        state, messages = fold(state, mutation, SCHEMA)
        emitted.extend(messages)
    assert [m.op for m in emitted] == [ChangeOp.CREATE, ChangeOp.UPDATE, ChangeOp.DELETE]
    assert emitted[0].before is None
    assert emitted[0].after == {"id": 1, "name": "ada", "age": 36}
    assert emitted[1].after == {"id": 1, "name": "ada", "age": 37}
    assert emitted[2].after is None
    for previous, message in pairwise(emitted):
        assert message.before == previous.after
    assert {m.schema_id for m in emitted} == {3}
    assert [m.audit.position for m in emitted] == [1, 2, 3]


def test_duplicates_and_stale_writes_emit_nothing() -> None:
    state, _ = fold(PartitionState(), _mutation(5, insert=True, name="ada"), SCHEMA)
    state, duplicate = fold(state, _mutation(5, insert=True, name="ada"), SCHEMA)
    state, stale = fold(state, _mutation(4, name="old"), SCHEMA)
    assert duplicate == []
    assert stale == []


def test_problems_name_unknown_columns_bad_values_and_keys() -> None:
    bad = Mutation(
        table="users",
        partition_key=("one",),
        cells={"age": Cell(value="x", write_time=1), "zip": Cell(value=1, write_time=1)},
        audit=Audit(source="test"),
    )
    problems = mutation_problems(bad, SCHEMA)
    assert len(problems) == 3
    assert any("zip" in p for p in problems)
    assert any("age" in p for p in problems)
    assert mutation_problems(_mutation(1, name="ok"), SCHEMA) == []
