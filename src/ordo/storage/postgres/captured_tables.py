"""The captured tables' definitions a PostgreSQL change source decodes its windows with.

Read from the catalog when a capture checks, creates, snapshots or publishes (`read`), and kept
in between: a following capture peeks a window at every poll, and reading the catalog for each
would add its queries to every poll. A window is decoded with the definitions as last read, so
after a table is dropped and created again (or altered) since, they may not fit its changes:
`decoded` then reads the catalog once more.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ordo.cdc.ports import CapturedWindow
from ordo.cdc.schema import TableSchema
from ordo.errors import CaptureError
from ordo.storage.postgres.catalog import Connection, TableRef, read_schema, resolve_tables
from ordo.storage.postgres.wal2json import SchemaOf


class CapturedTables:
    """The tables one slot captures (`names` as `split_table_name` gives them), as last read."""

    def __init__(self, slot: str, names: Mapping[str, tuple[str | None, str]]) -> None:
        self._slot, self._names = slot, names
        self._refs: dict[str, TableRef] = {}
        self._schemas: dict[tuple[str, str], TableSchema] = {}

    def read(self, conn: Connection) -> list[TableSchema]:
        """The schemas as the catalog has them now, in the order given (kept till read again)."""
        refs = resolve_tables(conn, self._names)
        schemas = [read_schema(conn, ref) for ref in refs]
        self._refs = {ref.given: ref for ref in refs}
        self._schemas = {(r.schema, r.name): s for r, s in zip(refs, schemas, strict=True)}
        return schemas

    def filter(self, conn: Connection) -> str:
        """The tables as wal2json's `add-tables` option takes them (read first if never read)."""
        if not self._schemas:
            self.read(conn)
        return ",".join(ref.wal2json_filter for ref in self._refs.values())

    def table(self, given: str) -> tuple[TableRef, TableSchema]:
        """Where a captured table (by its given name) lives and its schema, as last read."""
        if given not in self._refs:
            msg = f"table {given!r} is not captured by slot {self._slot!r}"
            raise CaptureError(msg)
        ref = self._refs[given]
        return ref, self._schemas[(ref.schema, ref.name)]

    def decoded(
        self, conn: Connection, decode: Callable[[SchemaOf], CapturedWindow]
    ) -> CapturedWindow:
        """`decode` with the schemas as last read, or, if it fails, as the catalog has them now.

        The capture reads the catalog before it publishes a window, so a following capture
        decoded the first changes of a table dropped and created again with another key with
        the old key, and stopped there for good (`lacks key columns`), where a new capture run
        went on. The catalog is read only when decoding fails, so a window that decodes reads it
        no more than before, and the window decoded again only when the catalog moved on; one
        that fails with the catalog's schemas too (changes of a table's old key still in the
        slot) raises that failure.
        """
        try:
            return decode(self._schema_of)
        except CaptureError:
            cached = self._schemas
            self.read(conn)
            if self._schemas == cached:
                raise
        return decode(self._schema_of)

    def _schema_of(self, schema: str, name: str) -> TableSchema:
        """The table's schema as last read; CaptureError for a table the slot does not capture."""
        if (schema, name) not in self._schemas:
            msg = f"slot {self._slot!r} sent a change of {schema}.{name}, which is not captured"
            raise CaptureError(msg)
        return self._schemas[(schema, name)]
