"""The G6 checker: messages chained by before/after, table = fold of messages = LWW of mutations."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ordo.cdc.change import ChangeMessage, Row
from ordo.cdc.mutation import Key, Mutation
from ordo.cdc.row_state import PartitionState
from ordo.cdc.schema import TableSchema, full_row


@dataclass(frozen=True, slots=True, kw_only=True)
class CdcReport:
    """Counts of each kind of G6 violation (all zero when the materializer is right)."""

    mutations: int
    messages: int
    rows: int
    broken_chains: int
    """Messages whose `before` is not the previous message's `after` for the same key."""
    table_not_fold: int
    """Keys where the materialized table differs from the fold of the messages."""
    table_not_lww: int
    """Keys where the materialized table differs from the last-write-wins merge of all mutations."""
    nonconforming: int
    """Messages whose rows do not conform to the schema they name."""

    @property
    def is_clean(self) -> bool:
        """Whether G6 held."""
        return not (
            self.broken_chains or self.table_not_fold or self.table_not_lww or self.nonconforming
        )

    def violations(self) -> dict[str, int]:
        """Each violation kind with its count, for the JSON report."""
        return {
            "broken_chains": self.broken_chains,
            "table_not_fold": self.table_not_fold,
            "table_not_lww": self.table_not_lww,
            "nonconforming": self.nonconforming,
        }


def expected_rows(schema: TableSchema, mutations: Iterable[Mutation]) -> tuple[dict[Key, Row], int]:
    """The last-write-wins merge of every mutation, as full rows by primary key, and the count."""
    partitions: dict[Key, PartitionState] = defaultdict(PartitionState)
    count = 0
    for mutation in mutations:
        partitions[mutation.partition_key] = partitions[mutation.partition_key].merged(mutation)
        count += 1
    rows = {
        partition_key + clustering_key: full_row(schema, partition_key + clustering_key, values)
        for partition_key, state in partitions.items()
        for clustering_key, values in state.visible_rows().items()
    }
    return rows, count


def _differing(left: Mapping[Key, Row], right: Mapping[Key, Row]) -> int:
    return sum(1 for key in left.keys() | right.keys() if left.get(key) != right.get(key))


def check(
    *,
    schema: TableSchema,
    mutations: Iterable[Mutation],
    messages: Iterable[ChangeMessage],
    table: Mapping[Key, Row],
) -> CdcReport:
    """Check G6 for one table; `messages` in emitted order (per key order is what matters)."""
    last_after: dict[Key, Row | None] = {}
    broken = nonconforming = count = 0
    for message in messages:
        count += 1
        if message.before != last_after.get(message.key):
            broken += 1
        last_after[message.key] = message.after
        for row in (message.before, message.after):
            if row is not None and schema.problems(row):
                nonconforming += 1
                break
    folded = {key: row for key, row in last_after.items() if row is not None}
    expected, mutation_count = expected_rows(schema, mutations)
    return CdcReport(
        mutations=mutation_count,
        messages=count,
        rows=len(table),
        broken_chains=broken,
        table_not_fold=_differing(folded, table),
        table_not_lww=_differing(expected, table),
        nonconforming=nonconforming,
    )
