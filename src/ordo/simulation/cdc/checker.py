"""The G6 checker: messages chained by before/after, table = fold of messages = LWW of mutations."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ordo.cdc.change import ChangeMessage, Row
from ordo.cdc.mutation import Key, Mutation
from ordo.cdc.ports import SchemaVersion
from ordo.cdc.retype import retyped_row
from ordo.cdc.row_state import PartitionState
from ordo.cdc.schema import full_row
from ordo.cdc.schema_catalog import ResolvedSchema, SchemaCatalog


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


def _catalog(versions: Sequence[SchemaVersion]) -> SchemaCatalog:
    """The versions as the materializer resolves them (UnknownSchemaError for an unknown id)."""
    table = versions[0].table if versions else ""
    return SchemaCatalog(table, lambda: versions)


def expected_rows(
    versions: Sequence[SchemaVersion], mutations: Iterable[Mutation]
) -> tuple[dict[Key, Row], int]:
    """The last-write-wins merge of every mutation as full rows of the current version, by key.

    Each mutation's cells go where the version it names puts them (`cell_names`), so values
    written before a column was dropped do not show in the column added again; values in the
    current version's types (`retyped_row`). Also returns how many mutations there were.
    """
    catalog = _catalog(versions)
    partitions: dict[Key, PartitionState] = defaultdict(PartitionState)
    count = 0
    for mutation in mutations:
        stored = catalog.resolve(mutation.schema_id).cells.stored(mutation)
        partitions[mutation.partition_key] = partitions[mutation.partition_key].merged(stored)
        count += 1
    current = catalog.resolve(None)
    rows: dict[Key, Row] = {}
    for partition_key, state in partitions.items():
        for clustering_key, values in state.visible_rows().items():
            key = partition_key + clustering_key
            row = rows[key] = full_row(current.schema, key, current.cells.shown(values))
            retyped_row(row, current.schema, current.retyped, key=key)
    return rows, count


def _shared(earlier: ResolvedSchema, later: ResolvedSchema) -> list[str]:
    """The columns whose data `later` carries from `earlier`: both have them, none dropped since.

    A column one of them does not have, or that was dropped and added again between them, may
    hold anything in the other (null, or a value the row got under the other version).
    """
    return [
        column
        for column in later.schema.names
        if column in earlier.schema.by_name
        and earlier.cells.stored_as.get(column) == later.cells.stored_as.get(column)
    ]


def _is_chained(
    previous: Row | None,
    previous_schema: ResolvedSchema | None,
    message: ChangeMessage,
    schema: ResolvedSchema,
) -> bool:
    """Whether `message.before` is the `previous` after as the message's version sees it.

    As it sees it: on the columns both versions carry, in the message's version's types.
    """
    before = message.before
    if previous is None or before is None or previous_schema is None:
        return previous is None and before is None
    shared = _shared(previous_schema, schema)
    seen = {c: previous.get(c) for c in shared}
    retyped_row(seen, schema.schema, schema.retyped, key=message.key)
    return all(before.get(c) == seen[c] for c in shared)


def _differing(left: Mapping[Key, Row], right: Mapping[Key, Row]) -> int:
    return sum(1 for key in left.keys() | right.keys() if left.get(key) != right.get(key))


def check(
    *,
    versions: Sequence[SchemaVersion],
    mutations: Iterable[Mutation],
    messages: Iterable[ChangeMessage],
    table: Mapping[Key, Row],
) -> CdcReport:
    """Check G6 for one table whose schema `versions` (oldest first) the messages name.

    `messages` in emitted order (per key order is what matters); `table` as read with the
    current accepted version. Each message is checked against the version it names; its
    `before` against the previous `after` of its key on the columns the two versions share;
    the table against the fold of the messages as the sink applies them (the values of the
    current version's columns each message carries, in its types) and against the
    last-write-wins merge of every mutation. Raises UnknownSchemaError for a schema id
    `versions` does not have.
    """
    catalog = _catalog(versions)
    current = catalog.resolve(None)
    last: dict[Key, tuple[Row | None, ResolvedSchema]] = {}
    folded: dict[Key, Row] = {}
    broken = nonconforming = count = 0
    for message in messages:
        count += 1
        schema = catalog.resolve(message.schema_id)
        previous, previous_schema = last.get(message.key, (None, None))
        if not _is_chained(previous, previous_schema, message, schema):
            broken += 1
        last[message.key] = (message.after, schema)
        if any(
            row is not None and schema.schema.problems(row)
            for row in (message.before, message.after)
        ):
            nonconforming += 1
        if message.after is None:
            folded.pop(message.key, None)
        else:
            row = folded.setdefault(message.key, dict.fromkeys(current.schema.names))
            row.update((c, message.after.get(c)) for c in _shared(schema, current))
            retyped_row(row, current.schema, current.retyped, key=message.key)
    expected, mutation_count = expected_rows(versions, mutations)
    return CdcReport(
        mutations=mutation_count,
        messages=count,
        rows=len(table),
        broken_chains=broken,
        table_not_fold=_differing(folded, table),
        table_not_lww=_differing(expected, table),
        nonconforming=nonconforming,
    )
