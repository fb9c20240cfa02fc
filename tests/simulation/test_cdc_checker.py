"""The G6 checker on a local fold of replica deliveries: clean when right, counts when not."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from cdc_support import RETYPED, RETYPED_VERSIONS, accepted_versions, schema_of_t, write
from ordo.cdc import (
    ChangeMessage,
    PartitionState,
    fold,
)
from ordo.cdc.change import Row
from ordo.cdc.materializer import materialize_partition
from ordo.cdc.mutation import Key, Mutation
from ordo.cdc.schema_catalog import SchemaCatalog
from ordo.simulation.cdc import SIMULATED_SCHEMA, ReplicaWorkload, check, replica_mutations

WORKLOAD = ReplicaWorkload(mutations=2_000, keys=40, replicas=3, seed=7)


VERSIONS = accepted_versions(SIMULATED_SCHEMA)


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


def test_messages_are_checked_against_the_version_they_name_across_a_drop_and_an_add() -> None:
    """v2 drops c, v3 adds it again, v4 adds d: a right materializer's messages are clean."""
    versions = accepted_versions(
        schema_of_t("b", "c"), schema_of_t("b"), schema_of_t("b", "c"), schema_of_t("b", "c", "d")
    )
    mutations = [
        write(1, 11, key=1, b=1, c=1),
        write(2, 11, key=2, b=1, c=1),
        write(3, 12, key=1, b=2),
        write(4, 13, key=1, b=3),
        write(5, 14, key=1, d=4),
        write(6, 11, key=1, c=9),  # a late replica copy of a write made before the drop
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
    mutations = [write(1, 11, n=5), write(2, 12, s="a"), write(3, 11, s="b")]
    messages = materialize_partition(PartitionState(), mutations, RETYPED.resolve).messages
    assert [m.schema_id for m in messages] == [11, 12, 11]
    table: dict[Key, Row] = {(1,): {"id": 1, "n": "5", "s": "b"}}

    report = check(versions=RETYPED_VERSIONS, mutations=mutations, messages=messages, table=table)

    assert report.is_clean, report.violations()
