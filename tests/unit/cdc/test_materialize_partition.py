"""The materializer's per-key work: order, checks, snapshot READs, schema ids, state encoding."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ordo.cdc import (
    Audit,
    Cell,
    ChangeOp,
    Column,
    ColumnType,
    Mutation,
    PartitionState,
    SchemaVersion,
    TableSchema,
)
from ordo.cdc.materializer import materialize_partition
from ordo.cdc.mutation import snapshot_segment
from ordo.cdc.schema_catalog import ResolvedSchema, SchemaCatalog
from ordo.cdc.state_json import decode_state, encode_state
from ordo.errors import IncompatibleSchemaError, UnknownSchemaError

SCHEMA = TableSchema(
    table="users",
    columns=(
        Column(name="id", type=ColumnType.LONG, nullable=False),
        Column(name="name", type=ColumnType.STRING),
    ),
    partition_key=("id",),
)


def _version(schema_id: int, version: int, *, accepted: bool = True) -> SchemaVersion:
    return SchemaVersion(
        schema_id=schema_id,
        table="users",
        version=version,
        schema=SCHEMA,
        is_accepted=accepted,
        registered_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    )


def _write(
    position: int, *, segment: str = "log", schema_id: int | None = None, **cells: object
) -> Mutation:
    return Mutation(
        table="users",
        partition_key=(1,),
        cells={k: Cell(value=v, write_time=position) for k, v in cells.items()},  # type: ignore[arg-type]
        liveness=Cell(value=True, write_time=position),
        schema_id=schema_id,
        audit=Audit(source="test", segment=segment, position=position),
    )


def _resolve(schema_id: int | None) -> ResolvedSchema:
    if schema_id in (None, 4):
        return ResolvedSchema(schema_id=4, schema=SCHEMA)
    msg = f"no schema id {schema_id}"
    raise UnknownSchemaError(msg)


def test_mutations_fold_in_position_order_and_bad_ones_are_rejected() -> None:
    folded = materialize_partition(
        PartitionState(),
        [
            _write(3, name="c"),
            _write(2, nickname="x"),
            _write(1, name="a"),
            _write(4, schema_id=9, name="z"),
        ],
        _resolve,
    )
    assert [(m.op, m.after) for m in folded.messages] == [
        (ChangeOp.CREATE, {"id": 1, "name": "a"}),
        (ChangeOp.UPDATE, {"id": 1, "name": "c"}),
    ]
    assert {m.schema_id for m in folded.messages} == {4}  # named although the mutations were not
    reasons = [r.reason for r in folded.rejected]
    assert "unknown column 'nickname'" in reasons[0]
    assert reasons[1] == "no schema id 9"


def test_snapshot_rows_are_reads_unless_the_row_is_known() -> None:
    snapshot = snapshot_segment("slot", 100)
    first = materialize_partition(
        PartitionState(), [_write(1, segment=snapshot, name="a")], _resolve
    )
    assert [m.op for m in first.messages] == [ChangeOp.READ]
    again = materialize_partition(first.state, [_write(2, segment=snapshot, name="b")], _resolve)
    assert [m.op for m in again.messages] == [ChangeOp.UPDATE]


def test_a_snapshot_is_folded_before_changes_whose_positions_overlap_its_ordinals() -> None:
    snapshot = snapshot_segment("sqlite:shop.db", 100)
    change = _write(1, name="b")  # position 1 in the change table, written after the snapshot
    row = Mutation(
        table="users",
        partition_key=(1,),
        cells={"name": Cell(value="a", write_time=0)},
        liveness=Cell(value=True, write_time=0),
        audit=Audit(source="test", segment=snapshot, position=2),
    )
    folded = materialize_partition(PartitionState(), [change, row], _resolve)
    assert [(m.op, m.after) for m in folded.messages] == [
        (ChangeOp.READ, {"id": 1, "name": "a"}),
        (ChangeOp.UPDATE, {"id": 1, "name": "b"}),
    ]


def test_the_catalog_reloads_on_a_miss_and_stops_at_a_pending_version() -> None:
    loaded: list[list[SchemaVersion]] = [
        [_version(4, 1)],
        [_version(4, 1), _version(6, 2, accepted=False)],
    ]
    catalog = SchemaCatalog("users", lambda: loaded.pop(0) if len(loaded) > 1 else loaded[0])
    assert catalog.resolve(None) == ResolvedSchema(schema_id=4, schema=SCHEMA)
    with pytest.raises(IncompatibleSchemaError):
        catalog.resolve(6)
    with pytest.raises(UnknownSchemaError):
        catalog.resolve(7)


times = st.integers(min_value=-3, max_value=2**62)
cells = st.builds(
    Cell,
    value=st.none()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text()
    | st.lists(st.integers()),
    write_time=times,
    ttl_s=st.none() | st.integers(min_value=1, max_value=10),
)
mutations = st.builds(
    Mutation,
    table=st.just("t"),
    partition_key=st.just((1,)),
    clustering_key=st.sampled_from([(), ("a",), (2,)]),
    cells=st.dictionaries(st.sampled_from(["x", "y"]), cells, min_size=1),
    liveness=st.none() | st.builds(Cell, value=st.just(True), write_time=times),
    row_deleted_at=st.none() | times,
    audit=st.just(Audit(source="s")),
)


@given(st.lists(mutations, max_size=6), st.none() | times)
def test_a_state_survives_its_encoding(
    batch: list[Mutation], partition_deleted_at: int | None
) -> None:
    state = PartitionState()
    for mutation in batch:
        state = state.merged(mutation)
    if partition_deleted_at is not None:
        state = state.merged(
            Mutation(
                table="t",
                partition_key=(1,),
                partition_deleted_at=partition_deleted_at,
                audit=Audit(source="s"),
            )
        )
    assert decode_state(encode_state(state)) == state
    assert encode_state(decode_state(encode_state(state))) == encode_state(state)
