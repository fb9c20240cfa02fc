"""Writes of a workload as the CDC publishers of N replicas deliver them (seed 003's hard case).

Clients write with clocks skewed by up to `max_skew_us`; every write reaches a quorum of replicas
and each of the others with probability `delivery`, so a write appears one to N times; each
replica delivers in its own order (writes arrive out of write-time order, and a replica's commit
log interleaves clients); writes carry only some columns, delete cells or rows, and some cells
expire (TTL). Positions count per replica commit log, as in Cassandra's CDC segments.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from ordo.cdc.column_type import ColumnType
from ordo.cdc.mutation import Audit, Cell, JsonValue, Mutation
from ordo.cdc.schema import Column, TableSchema

TABLE = "readings"
SIMULATED_SCHEMA = TableSchema(
    table=TABLE,
    columns=(
        Column(name="sensor", type=ColumnType.LONG, nullable=False),
        Column(name="slot", type=ColumnType.LONG, nullable=False),
        Column(name="label", type=ColumnType.STRING),
        Column(name="value", type=ColumnType.DOUBLE),
        Column(name="count", type=ColumnType.LONG),
    ),
    partition_key=("sensor",),
    clustering_key=("slot",),
)
_VALUE_COLUMNS = ("label", "value", "count")
_SLOTS = 3
_START_US = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaWorkload:
    """How many writes, keys and replicas, and how badly the replicas behave."""

    mutations: int
    keys: int
    replicas: int = 3
    seed: int = 1
    clients: int = 4
    max_skew_us: int = 50_000
    """Each client's clock is off by up to this much (either way)."""
    delivery: float = 0.8
    """Chance that a replica outside the write's quorum receives it too."""
    reorder_window: int = 64
    """A replica delivers a write up to this many places away from its write order."""


def _value(rng: random.Random, column: str) -> JsonValue:
    if rng.random() < 0.1:
        return None  # a cell deletion
    if column == "label":
        return rng.choice(("ok", "warn", "fail", "idle"))
    if column == "value":
        return round(rng.uniform(-50, 50), 3)
    return rng.randrange(1000)


def _write(rng: random.Random, workload: ReplicaWorkload, at_us: int) -> Mutation:
    """One client write (the audit is filled in per replica)."""
    sensor = rng.randrange(workload.keys)
    slot = rng.randrange(_SLOTS)
    kind = rng.random()
    audit = Audit(source="cassandra")
    if kind < 0.02:
        return Mutation(
            table=TABLE, partition_key=(sensor,), partition_deleted_at=at_us, audit=audit
        )
    if kind < 0.08:
        return Mutation(
            table=TABLE,
            partition_key=(sensor,),
            clustering_key=(slot,),
            row_deleted_at=at_us,
            audit=audit,
        )
    is_insert = kind < 0.4
    columns = _VALUE_COLUMNS if is_insert else rng.sample(_VALUE_COLUMNS, rng.randint(1, 2))
    ttl_s = rng.choice((1, 5)) if rng.random() < 0.05 else None
    return Mutation(
        table=TABLE,
        partition_key=(sensor,),
        clustering_key=(slot,),
        cells={c: Cell(value=_value(rng, c), write_time=at_us, ttl_s=ttl_s) for c in columns},
        liveness=Cell(value=True, write_time=at_us, ttl_s=ttl_s) if is_insert else None,
        audit=audit,
    )


def client_writes(workload: ReplicaWorkload) -> list[Mutation]:
    """The workload's writes in the order clients made them, with skewed write times."""
    rng = random.Random(workload.seed)
    skews = [
        rng.randint(-workload.max_skew_us, workload.max_skew_us) for _ in range(workload.clients)
    ]
    writes = []
    for index in range(workload.mutations):
        now_us = _START_US + index * 1_000  # one write per millisecond of real time
        writes.append(_write(rng, workload, now_us + skews[rng.randrange(workload.clients)]))
    return writes


def replica_mutations(workload: ReplicaWorkload) -> Iterator[Mutation]:
    """Every replica's deliveries, replica after replica, each in that replica's order."""
    rng = random.Random(workload.seed + 1)
    writes = client_writes(workload)
    quorum = workload.replicas // 2 + 1
    received: list[list[tuple[float, Mutation]]] = [[] for _ in range(workload.replicas)]
    for index, write in enumerate(writes):
        chosen = set(rng.sample(range(workload.replicas), quorum))
        chosen |= {r for r in range(workload.replicas) if rng.random() < workload.delivery}
        for replica in chosen:
            jitter = rng.uniform(0, workload.reorder_window)
            received[replica].append((index + jitter, write))
    for replica, deliveries in enumerate(received):
        deliveries.sort(key=lambda delivery: delivery[0])
        name = f"10.0.0.{replica + 1}"
        for position, (_, write) in enumerate(deliveries, start=1):
            yield Mutation(
                table=write.table,
                partition_key=write.partition_key,
                clustering_key=write.clustering_key,
                cells=write.cells,
                liveness=write.liveness,
                row_deleted_at=write.row_deleted_at,
                partition_deleted_at=write.partition_deleted_at,
                audit=Audit(
                    source="cassandra",
                    replica=name,
                    segment=f"{name}/CommitLog-7-{position // 10_000}.log",
                    position=position,
                    captured_at_us=_START_US + position * 1_000,
                ),
            )
