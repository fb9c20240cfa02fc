"""The G6 checker on a local fold of replica deliveries: clean when right, counts when not."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import defaultdict

from cdc_support import RETYPED, RETYPED_VERSIONS
from ordo.cdc import (
    Audit,
    Cell,
    ChangeMessage,
    Column,
    ColumnType,
    PartitionState,
    SchemaVersion,
    TableSchema,
    fold,
)
from ordo.cdc.change import Row
from ordo.cdc.materializer import materialize_partition
from ordo.cdc.mutation import Key, Mutation
from ordo.cdc.schema_catalog import SchemaCatalog
from ordo.simulation.cdc import SIMULATED_SCHEMA, ReplicaWorkload, check, replica_mutations

WORKLOAD = ReplicaWorkload(mutations=2_000, keys=40, replicas=3, seed=7)


def _versions(*schemas: TableSchema) -> list[SchemaVersion]:
    """Accepted versions 1, 2, ... of the schemas, with schema ids 11, 12, ..."""
    return [
        SchemaVersion(
            schema_id=10 + number,
            table=schema.table,
            version=number,
            schema=schema,
            is_accepted=True,
            registered_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        )
        for number, schema in enumerate(schemas, 1)
    ]


VERSIONS = _versions(SIMULATED_SCHEMA)


def _materialize(mutations: list[Mutation]) -> tuple[list[ChangeMessage], dict[Key, Row]]:
    states: dict[Key, PartitionState] = defaultdict(PartitionState)
    messages: list[ChangeMessage] = []
    table: dict[Key, Row] = {}
    for mutation in mutations:
        states[mutation.partition_key], emitted = fold(
            states[mutation.partition_key], mutation, SIMULATED_SCHEMA
        )
        for message in emitted:
            messages.append(message)
            if message.after is None:
                table.pop(message.key, None)
            else:
                table[message.key] = message.after
    return messages, table


def test_replicas_duplicate_and_reorder_writes() -> None:
    deliveries = list(replica_mutations(WORKLOAD))
    assert WORKLOAD.mutations * 2 <= len(deliveries) <= WORKLOAD.mutations * 3
    assert {m.audit.replica for m in deliveries} == {"10.0.0.1", "10.0.0.2", "10.0.0.3"}
    times = [m.write_time for m in deliveries if m.audit.replica == "10.0.0.1"]
    assert times != sorted(times)


def test_a_correct_fold_is_clean_and_a_broken_one_is_caught() -> None:
    deliveries = list(replica_mutations(WORKLOAD))
    messages, table = _materialize(deliveries)
    report = check(versions=VERSIONS, mutations=deliveries, messages=messages, table=table)
    assert report.is_clean, report.violations()
    assert report.messages > 0

    key = next(iter(table))
    wrong_table = {**table, key: {**table[key], "label": "tampered"}}
    report = check(versions=VERSIONS, mutations=deliveries, messages=messages, table=wrong_table)
    assert (report.table_not_fold, report.table_not_lww, report.broken_chains) == (1, 1, 0)

    dropped = next(
        i for i, m in enumerate(messages) if any(later.key == m.key for later in messages[i + 1 :])
    )
    report = check(
        versions=VERSIONS,
        mutations=deliveries,
        messages=messages[:dropped] + messages[dropped + 1 :],
        table=table,
    )
    assert report.broken_chains == 1

    last = len(messages) - 1
    bad = dataclasses.replace(messages[last], after={**(messages[last].after or {}), "count": "x"})
    report = check(
        versions=VERSIONS, mutations=deliveries, messages=[*messages[:last], bad], table=table
    )
    assert report.nonconforming == 1


def _schema(*columns: str) -> TableSchema:
    key = Column(name="id", type=ColumnType.LONG, nullable=False)
    values = (Column(name=name, type=ColumnType.LONG) for name in columns)
    return TableSchema(table="t", columns=(key, *values), partition_key=("id",))


def _write(key: int, at: int, schema_id: int, **cells: int) -> Mutation:
    return Mutation(
        table="t",
        partition_key=(key,),
        cells={name: Cell(value=value, write_time=at) for name, value in cells.items()},
        liveness=Cell(value=True, write_time=at),
        schema_id=schema_id,
        audit=Audit(source="test", position=at),
    )


def test_messages_are_checked_against_the_version_they_name_across_a_drop_and_an_add() -> None:
    """v2 drops c, v3 adds it again, v4 adds d: a right materializer's messages are clean."""
    versions = _versions(_schema("b", "c"), _schema("b"), _schema("b", "c"), _schema("b", "c", "d"))
    mutations = [
        _write(1, 1, 11, b=1, c=1),
        _write(2, 2, 11, b=1, c=1),
        _write(1, 3, 12, b=2),
        _write(1, 4, 13, b=3),
        _write(1, 5, 14, d=4),
        _write(1, 6, 11, c=9),  # a late replica copy of a write made before the drop
    ]
    catalog = SchemaCatalog("t", lambda: versions)
    messages: list[ChangeMessage] = []
    for key in (1, 2):
        mine = [m for m in mutations if m.partition_key == (key,)]
        messages.extend(materialize_partition(PartitionState(), mine, catalog.resolve).messages)
    assert {m.schema_id for m in messages} == {11, 12, 13, 14}
    table: dict[Key, Row] = {
        (1,): {"id": 1, "b": 3, "c": None, "d": 4},
        (2,): {"id": 2, "b": 1, "c": None, "d": None},  # c was dropped: the sink dropped it
    }
    report = check(versions=versions, mutations=mutations, messages=messages, table=table)
    assert report.is_clean, report.violations()

    resurrected = {**table, (2,): {**table[(2,)], "c": 1}}
    report = check(versions=versions, mutations=mutations, messages=messages, table=resurrected)
    assert (report.table_not_fold, report.table_not_lww) == (1, 1)
    named_v2 = [dataclasses.replace(m, schema_id=12) if m.schema_id == 11 else m for m in messages]
    report = check(versions=versions, mutations=mutations, messages=named_v2, table=table)
    assert report.nonconforming == 2  # rows with c under a version without it


def test_messages_across_a_retype_are_checked_in_the_types_of_their_versions() -> None:
    """v2 retypes n long -> string: a right materializer's messages and table are clean."""
    mutations = [
        Mutation(
            table="t",
            partition_key=(1,),
            cells={name: Cell(value=value, write_time=at) for name, value in cells.items()},
            liveness=Cell(value=True, write_time=at),
            schema_id=schema_id,
            audit=Audit(source="test", position=at),
        )
        for at, schema_id, cells in [(1, 11, {"n": 5}), (2, 12, {"s": "a"}), (3, 11, {"s": "b"})]
    ]
    messages = materialize_partition(PartitionState(), mutations, RETYPED.resolve).messages
    assert [m.schema_id for m in messages] == [11, 12, 11]
    table: dict[Key, Row] = {(1,): {"id": 1, "n": "5", "s": "b"}}

    report = check(versions=RETYPED_VERSIONS, mutations=mutations, messages=messages, table=table)

    assert report.is_clean, report.violations()
