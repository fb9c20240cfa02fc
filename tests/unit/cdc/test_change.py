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


def test_text_set_aside_is_called_not_utf8_only_when_its_bytes_are_not() -> None:
    """`CAST(x'<hex>' AS TEXT)` is how the SQLite capture records text that is not UTF-8; a value
    that only looks like it (valid UTF-8, or no hex) is what else it is: a BLOB's place here."""
    reasons = {
        aside: mutation_problems(
            Mutation(
                table="users",
                partition_key=(1,),
                cells={"name (not JSON)": Cell(value=aside, write_time=1)},
                audit=Audit(source="test"),
            ),
            SCHEMA,
        )
        for aside in ("CAST(x'ff41' AS TEXT)", "CAST(x'41' AS TEXT)", "CAST(x'zz' AS TEXT)")
    }
    assert reasons == {
        "CAST(x'ff41' AS TEXT)": [
            "column 'name': \"CAST(x'ff41' AS TEXT)\" is text that is not UTF-8, "
            "which a string column cannot hold"
        ],
        "CAST(x'41' AS TEXT)": [
            "column 'name': \"CAST(x'41' AS TEXT)\" is a BLOB, which a string column cannot hold"
        ],
        "CAST(x'zz' AS TEXT)": [
            "column 'name': \"CAST(x'zz' AS TEXT)\" is a BLOB, which a string column cannot hold"
        ],
    }
