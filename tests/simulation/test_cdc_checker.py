"""The G6 checker on a local fold of replica deliveries: clean when right, counts when not."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from ordo.cdc import ChangeMessage, PartitionState, fold
from ordo.cdc.change import Row
from ordo.cdc.mutation import Key, Mutation
from ordo.simulation.cdc import SIMULATED_SCHEMA, ReplicaWorkload, check, replica_mutations

WORKLOAD = ReplicaWorkload(mutations=2_000, keys=40, replicas=3, seed=7)


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
    report = check(schema=SIMULATED_SCHEMA, mutations=deliveries, messages=messages, table=table)
    assert report.is_clean, report.violations()
    assert report.messages > 0

    key = next(iter(table))
    wrong_table = {**table, key: {**table[key], "label": "tampered"}}
    report = check(
        schema=SIMULATED_SCHEMA, mutations=deliveries, messages=messages, table=wrong_table
    )
    assert (report.table_not_fold, report.table_not_lww, report.broken_chains) == (1, 1, 0)

    dropped = next(
        i for i, m in enumerate(messages) if any(later.key == m.key for later in messages[i + 1 :])
    )
    report = check(
        schema=SIMULATED_SCHEMA,
        mutations=deliveries,
        messages=messages[:dropped] + messages[dropped + 1 :],
        table=table,
    )
    assert report.broken_chains == 1

    last = len(messages) - 1
    bad = dataclasses.replace(messages[last], after={**(messages[last].after or {}), "count": "x"})
    report = check(
        schema=SIMULATED_SCHEMA, mutations=deliveries, messages=[*messages[:last], bad], table=table
    )
    assert report.nonconforming == 1
