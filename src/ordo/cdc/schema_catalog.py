"""A table's schema versions as a materializer resolves them: cached, reloaded on a miss.

Materializer tasks run for a long time while captures register new schema versions; a task
reads the versions once when it first needs one, and again when a mutation names a schema id
it has not seen, so ids registered after the query started are found without a restart.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ordo.cdc.cell_names import SAME_NAMES, CellNames, cell_names_by_id
from ordo.cdc.ports import SchemaVersion
from ordo.cdc.retype import retyped_columns
from ordo.cdc.schema import TableSchema
from ordo.errors import IncompatibleSchemaError, UnknownSchemaError

VersionLoader = Callable[[], Sequence[SchemaVersion]]
"""Reads every version of the catalog's table, oldest first (e.g. `SchemaStore.versions`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedSchema:
    """The schema version a mutation or message names, as the fold uses it."""

    schema_id: int
    schema: TableSchema
    cells: CellNames = SAME_NAMES
    """Where the version's writes go in the fold state and where its messages read them."""
    retyped: frozenset[str] = frozenset()
    """The columns another accepted version of the table types otherwise: the fold state may
    hold their values in that type, which the version's messages convert (`retyped_row`)."""


class SchemaCatalog:
    """Resolves schema ids of one table for `materialize_partition` (not thread-safe)."""

    def __init__(self, table: str, load: VersionLoader) -> None:
        self.table = table
        self._load = load
        self._by_id: dict[int, SchemaVersion] | None = None
        self._resolved: dict[int, ResolvedSchema] = {}
        self._unknown: set[int] = set()

    def resolve(self, schema_id: int | None) -> ResolvedSchema:
        """The version a message names (None: the current accepted one) with its cell names.

        Raises UnknownSchemaError for an id the table does not have (after one reload), and
        IncompatibleSchemaError for a version still waiting for an operator: the pipeline stops
        there rather than publish what readers of the accepted version cannot read.
        """
        by_id = self._versions(schema_id)
        if schema_id is None:
            accepted = [v for v in by_id.values() if v.is_accepted]
            if not accepted:
                msg = f"no schema is registered for table {self.table!r}"
                raise UnknownSchemaError(msg)
            version = max(accepted, key=lambda v: v.version)
        else:
            found = by_id.get(schema_id)
            if found is None:
                msg = f"table {self.table!r} has no schema id {schema_id}"
                raise UnknownSchemaError(msg)
            version = found
        if not version.is_accepted:
            raise IncompatibleSchemaError(table=self.table, version=version.version, problems=())
        return self._resolved[version.schema_id]

    def _versions(self, schema_id: int | None) -> dict[int, SchemaVersion]:
        by_id = self._by_id
        is_miss = schema_id is not None and by_id is not None and schema_id not in by_id
        if by_id is None or (is_miss and schema_id not in self._unknown):
            loaded = [v for v in self._load() if v.table == self.table]
            by_id = self._by_id = {v.schema_id: v for v in loaded}
            cells = cell_names_by_id(loaded)
            retyped = retyped_columns(v.schema for v in loaded if v.is_accepted)
            self._resolved = {
                schema_id: ResolvedSchema(
                    schema_id=schema_id,
                    schema=by_id[schema_id].schema,
                    cells=names,
                    retyped=retyped,
                )
                for schema_id, names in cells.items()
            }
            if schema_id is not None and schema_id not in by_id:
                self._unknown.add(schema_id)
        return by_id
