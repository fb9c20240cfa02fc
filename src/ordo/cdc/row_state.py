"""Last write wins per cell, as Cassandra reconciles replicas: the pure core of the materializer.

Folding mutations into a `PartitionState` is commutative, associative and idempotent, so the final
rows do not depend on the order in which replicas deliver writes or on how often they repeat them
(G6). Ties are broken as Cassandra 4 breaks them, so every node (and this fold) agrees:

1. the newer write time wins;
2. at equal write times a deletion (tombstone) wins over a live value;
3. between live values, an expiring cell wins over a non-expiring one, the later expiry first;
4. finally the larger value wins (compared by its canonical JSON encoding).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from ordo.cdc.mutation import Cell, JsonValue, Key, Mutation

NEVER = -(2**63)
"""Deletion time that shadows nothing."""


def _value_order(value: JsonValue) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")


def _expiry_order(cell: Cell) -> float:
    expires_at = cell.expires_at
    return float("inf") if expires_at is None else -expires_at


def reconcile(a: Cell, b: Cell) -> Cell:
    """The cell that wins when two writes of one column meet (see the module docstring)."""
    if a.write_time != b.write_time:
        return a if a.write_time > b.write_time else b
    if a.ttl_s == b.ttl_s and type(a.value) is type(b.value) and a.value == b.value:
        return a  # a replica duplicate: the common tie, settled without encoding values
    if (a.value is None) != (b.value is None):
        return a if a.value is None else b
    if _expiry_order(a) != _expiry_order(b):
        return a if _expiry_order(a) < _expiry_order(b) else b
    return a if _value_order(a.value) >= _value_order(b.value) else b


@dataclass(frozen=True, slots=True, kw_only=True)
class RowState:
    """What is known of one row: the winning cell per column, the row marker, the row deletion."""

    cells: Mapping[str, Cell] = field(default_factory=dict)
    liveness: Cell | None = None
    deleted_at: int = NEVER

    def merged(self, mutation: Mutation, *, partition_deleted_at: int) -> RowState:
        """The row with `mutation`'s cells, marker and deletion reconciled in."""
        deleted_at = max(self.deleted_at, mutation.row_deleted_at or NEVER)
        shadow = max(deleted_at, partition_deleted_at)
        cells = dict(self.cells)
        for column, cell in mutation.cells.items():
            held = cells.get(column)
            cells[column] = cell if held is None else reconcile(held, cell)
        liveness = self.liveness
        if mutation.liveness is not None:
            liveness = (
                mutation.liveness if liveness is None else reconcile(liveness, mutation.liveness)
            )
        return RowState(
            cells={c: cell for c, cell in cells.items() if cell.write_time > shadow},
            liveness=liveness if liveness is not None and liveness.write_time > shadow else None,
            deleted_at=deleted_at,
        )

    @property
    def is_expiring(self) -> bool:
        """Whether a cell or the marker has a TTL (the row may change as event time moves)."""
        marker = self.liveness
        return (marker is not None and marker.ttl_s is not None) or any(
            cell.ttl_s is not None for cell in self.cells.values()
        )

    def visible(self, *, partition_deleted_at: int, now: int) -> dict[str, JsonValue] | None:
        """The row's live values at `now`, or None when the row does not exist.

        A row exists while its INSERT marker or any of its cells is live and newer than every
        deletion that covers it, as in Cassandra.
        """
        shadow = max(self.deleted_at, partition_deleted_at)
        values: dict[str, JsonValue] = {
            column: cell.value
            for column, cell in self.cells.items()
            if cell.write_time > shadow
            and cell.value is not None
            and (cell.ttl_s is None or now < cell.write_time + cell.ttl_s * 1_000_000)
        }
        marker = self.liveness
        is_marked = marker is not None and marker.write_time > shadow and marker.is_live(now)
        return values if values or is_marked else None


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionState:
    """Every row of one partition key, the partition deletion, and the newest write time seen.

    `now` is event time: the newest write time of any mutation folded in. TTLs are evaluated
    against it, so an expiry becomes visible with the partition's next write (and the final state
    does not depend on when the fold ran).
    """

    rows: Mapping[Key, RowState] = field(default_factory=dict)
    deleted_at: int = NEVER
    now: int = NEVER

    def merged(self, mutation: Mutation, *, write_time: int | None = None) -> PartitionState:
        """The partition with `mutation` folded in (a partition delete touches every row).

        `write_time` is `mutation.write_time` when the caller has it already (the fold, which
        needs it for its messages too: it is a max over the cells).
        """
        deleted_at = max(self.deleted_at, mutation.partition_deleted_at or NEVER)
        rows = dict(self.rows)
        if mutation.partition_deleted_at is None:
            held = rows.get(mutation.clustering_key, RowState())
            rows[mutation.clustering_key] = held.merged(mutation, partition_deleted_at=deleted_at)
        elif deleted_at > self.deleted_at:
            for clustering_key, row in rows.items():
                rows[clustering_key] = replace(
                    row,
                    cells={c: x for c, x in row.cells.items() if x.write_time > deleted_at},
                    liveness=(
                        row.liveness
                        if row.liveness is not None and row.liveness.write_time > deleted_at
                        else None
                    ),
                )
        if write_time is None:
            write_time = mutation.write_time
        return PartitionState(rows=rows, deleted_at=deleted_at, now=max(self.now, write_time))

    def visible(self, clustering_key: Key) -> dict[str, JsonValue] | None:
        """The live values of one row now, or None when it does not exist."""
        row = self.rows.get(clustering_key)
        if row is None:
            return None
        return row.visible(partition_deleted_at=self.deleted_at, now=self.now)

    def visible_rows(self) -> dict[Key, dict[str, JsonValue]]:
        """Every existing row of the partition by clustering key."""
        found = {ck: self.visible(ck) for ck in self.rows}
        return {ck: values for ck, values in found.items() if values is not None}
