"""The schema registry: versions of each table's schema, and the compatibility rule between them.

Seed 003's pipeline publishes nothing without a schema. Registering a schema equal to the current
one is a no-op; a compatible change (a new nullable column) becomes the next accepted version at
once; an incompatible one is stored as a pending version and raises IncompatibleSchemaError, and
keeps raising for that table until an operator accepts it (`ordo cdc schemas accept`), so a
pipeline stops instead of publishing data its readers cannot read.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ordo.cdc.column_type import ColumnType
from ordo.cdc.ports import SchemaStore, SchemaVersion
from ordo.cdc.schema import TableSchema
from ordo.errors import IncompatibleSchemaError, UnknownSchemaError

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class SchemaHistory:
    """A table's current accepted version, and what its older versions had.

    What the materialized table follows, and which messages it refuses: the sink takes it whole
    (`SqlChangeSink.apply_batch`), so its parts always come from the same versions.
    """

    current: SchemaVersion
    retired: frozenset[str]
    """The columns an older accepted version had and the current has not: the table drops
    them. Only columns ordo created from a version, never one added to the table by hand (nor
    one only a pending version has)."""
    former_types: Mapping[str, tuple[ColumnType, ...]]
    """For each column of the current version that an older one typed otherwise, those types,
    newest first: the types the table may still hold the column in (an accepted retype)."""
    old_key_ids: frozenset[int]
    """The schema ids of the older versions keyed otherwise than the current one (see
    `TableSchema.is_keyed_as`): a message naming one was written before a key change and names
    a row that the table, keyed by the current key, does not have (the sink refuses it)."""


class SchemaRegistry:
    """Registers, checks and looks up schema versions in a SchemaStore."""

    def __init__(self, store: SchemaStore) -> None:
        self.store = store

    def register(self, schema: TableSchema) -> SchemaVersion:
        """The accepted version equal to `schema`, registering it when new.

        Raises IncompatibleSchemaError when `schema` is an incompatible change of the table's
        accepted schema, and for every schema while a pending version waits for an operator.
        """
        return self.register_accepted(schema)[-1]

    def register_accepted(self, schema: TableSchema) -> Sequence[SchemaVersion]:
        """`register`, returning every accepted version of the table, oldest first.

        The last is the one equal to `schema`. A capture needs the older ones to name the
        changes written before an incompatible step, and gets them from the one read of the
        store that registering makes. Raises as `register` does.
        """
        versions = self.store.versions(schema.table)
        accepted = [v for v in versions if v.is_accepted]
        current = accepted[-1] if accepted else None
        pending = [v for v in versions if current is None or v.version > current.version]
        if pending:
            raise self._incompatible(current, pending[-1])
        if current is not None and current.schema.fingerprint == schema.fingerprint:
            return accepted
        if current is None:
            version = self.store.add_version(schema, is_accepted=True)
            logger.info("registered schema table=%s version=%d", schema.table, version.version)
            return [version]
        problems = current.schema.incompatibilities(schema)
        version = self.store.add_version(schema, is_accepted=not problems)
        if problems:
            raise self._incompatible(current, version)
        logger.info("compatible schema change table=%s version=%d", schema.table, version.version)
        return [*accepted, version]

    def register_written(self, schema: TableSchema) -> None:
        """Register `schema`, one a captured change was written under, unless a version reads it.

        The source's catalog no longer has it (a column added and dropped again between two
        capture windows), so registering the catalog never did. A version that reads it is an
        accepted one keyed alike with each of its columns, typed alike: the change fits that
        one, and registering it again added a version on every capture of the window. Else it
        is registered as a new version (`register`, raising as it does), as if a capture had
        run while the table had it, and the catalog's schema registered after it is then the
        change that dropped the column, waiting for an operator as such a change does.
        """
        for version in self.store.versions(schema.table):
            held = version.schema.by_name
            if (
                version.is_accepted
                and version.schema.is_keyed_as(schema)
                and all(c.name in held and held[c.name].type is c.type for c in schema.columns)
            ):
                return
        self.register(schema)

    def current(self, table: str) -> SchemaVersion:
        """The table's newest accepted version; UnknownSchemaError when none is registered."""
        return _newest_accepted(table, self.store.versions(table))

    def history(self, table: str) -> SchemaHistory:
        """The table's newest accepted version, and what older versions had that it has not.

        What the materialized table follows, and which messages it refuses, from one read of
        the versions (the sink reads it for every batch). Only the accepted versions before it
        count: a pending one's columns were never the table's, and no message names a pending
        version (the materializer stops at one). Raises UnknownSchemaError when the table has
        no accepted version.
        """
        versions = self.store.versions(table)
        current = _newest_accepted(table, versions)
        names = set(current.schema.names)
        older = [v for v in reversed(versions) if v.is_accepted and v.version < current.version]
        schemas = [v.schema for v in older]
        return SchemaHistory(
            current=current,
            retired=frozenset(
                column.name
                for schema in schemas
                for column in schema.columns
                if column.name not in names
            ),
            former_types=_former_types(current.schema, schemas),
            old_key_ids=frozenset(
                v.schema_id for v in older if not current.schema.is_keyed_as(v.schema)
            ),
        )

    def by_id(self, schema_id: int) -> SchemaVersion:
        """The version a message names; UnknownSchemaError when there is none."""
        version = self.store.version_by_id(schema_id)
        if version is None:
            msg = f"no schema version has schema id {schema_id}"
            raise UnknownSchemaError(msg)
        return version

    def accept(self, table: str, version: int) -> SchemaVersion:
        """An operator's acceptance of a pending version (and of every older pending one)."""
        versions = self.store.versions(table)
        if not any(v.version == version for v in versions):
            msg = f"table {table!r} has no schema version {version}"
            raise UnknownSchemaError(msg)
        accepted = None
        for waiting in versions:
            if waiting.version <= version and not waiting.is_accepted:
                accepted = self.store.mark_accepted(table, waiting.version)
        logger.info("accepted schema table=%s version=%d", table, version)
        return accepted or next(v for v in versions if v.version == version)

    def versions(self, table: str) -> Sequence[SchemaVersion]:
        """Every version of the table, oldest first."""
        return self.store.versions(table)

    @staticmethod
    def _incompatible(
        current: SchemaVersion | None, waiting: SchemaVersion
    ) -> IncompatibleSchemaError:
        problems = (
            () if current is None else tuple(current.schema.incompatibilities(waiting.schema))
        )
        return IncompatibleSchemaError(
            table=waiting.table, version=waiting.version, problems=problems
        )


def _newest_accepted(table: str, versions: Sequence[SchemaVersion]) -> SchemaVersion:
    """The newest accepted of the table's `versions`; UnknownSchemaError when there is none."""
    accepted = [v for v in versions if v.is_accepted]
    if not accepted:
        msg = f"no schema is registered for table {table!r} (run `ordo cdc schemas register`)"
        raise UnknownSchemaError(msg)
    return accepted[-1]


def _former_types(
    current: TableSchema, older: Sequence[TableSchema]
) -> dict[str, tuple[ColumnType, ...]]:
    """The other types the `older` schemas (newest first) gave `current`'s columns, newest first."""
    found: dict[str, dict[ColumnType, None]] = {}
    for schema in older:
        for column in schema.columns:
            now = current.by_name.get(column.name)
            if now is not None and column.type is not now.type:
                found.setdefault(column.name, {})[column.type] = None
    return {name: tuple(types) for name, types in found.items()}
