"""Where the fold keeps a column's cells: a column dropped and added again is another column.

A dropped column's data is gone, in Cassandra (its DROP records the drop time and ignores older
cells, even once a column of that name is added again) as in Debezium's messages. The fold's
state is keyed by column name, so a key's state still holds the cells written before a drop;
without this, the first message of the key under a version that adds the column again would show
them in `after` and `before`, though no write set the new column. Instead the cells written under
a version that re-added a column (or under a later version that still has it) are kept under
another name, `readded_cell(column, version)`, and messages show a column from its newest cells.

Which cells a write goes to is decided by the schema version its mutation names, never by when
the mutation arrives, so the fold stays order-independent (G6): a late replica copy of a write
made before the drop names the old version and lands in the old cells, which no message shows
again. Only accepted versions count: a pending one re-adds nothing until an operator accepts it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ordo.cdc.mutation import JsonValue, Mutation
from ordo.cdc.ports import SchemaVersion


def readded_cell(column: str, version: int) -> str:
    """The state's name for the cells of `column` as `version` added it again after a drop.

    Joined by a NUL, which no column name has (`ordo.cdc.schema` refuses it, as PostgreSQL
    does): a readable suffix such as " (v3)" could be a real column's name.
    """
    return f"{column}\x00v{version}"


@dataclass(frozen=True, slots=True, kw_only=True)
class CellNames:
    """How one schema version's writes and messages name the fold state's cells.

    Both maps hold re-added columns only (every other column's cells go by its own name), so
    they are empty, and cost nothing, for a table that never added a dropped column again.
    """

    stored_as: Mapping[str, str] = field(default_factory=dict)
    """The state cell a write of the version goes to, for a column the version re-added."""
    shown_from: Mapping[str, str] = field(default_factory=dict)
    """The state cell messages show a column from: its newest incarnation (the table's)."""

    def stored(self, mutation: Mutation) -> Mutation:
        """`mutation` with its cells named as the state keeps them."""
        renamed = self.stored_as
        if not renamed or renamed.keys().isdisjoint(mutation.cells):
            return mutation
        cells = {renamed.get(column, column): cell for column, cell in mutation.cells.items()}
        return dataclasses.replace(mutation, cells=cells)

    def shown(self, values: Mapping[str, JsonValue]) -> Mapping[str, JsonValue]:
        """A row's visible state cells as a message shows them, by column name."""
        if not self.shown_from:
            return values
        return {**values, **{column: values.get(cell) for column, cell in self.shown_from.items()}}


SAME_NAMES = CellNames()
"""Every column's cells under its own name: a table whose columns were never added again."""


def cell_names_by_id(versions: Sequence[SchemaVersion]) -> dict[int, CellNames]:
    """The `CellNames` of each accepted version of one table (`versions` oldest first), by id."""
    newest: dict[str, str] = {}
    stored_as: dict[int, dict[str, str]] = {}
    seen: set[str] = set()
    present: frozenset[str] = frozenset()
    for version in versions:
        if not version.is_accepted:
            continue
        columns = frozenset(version.schema.names)
        for column in columns - present:
            if column in seen:
                newest[column] = readded_cell(column, version.version)
        stored_as[version.schema_id] = {c: newest[c] for c in columns if c in newest}
        seen |= columns
        present = columns
    return {
        schema_id: CellNames(stored_as=names, shown_from=newest) if newest else SAME_NAMES
        for schema_id, names in stored_as.items()
    }
