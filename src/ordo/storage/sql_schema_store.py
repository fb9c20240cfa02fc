"""The CDC schema registry's versions in the journal database (`cdc_schemas`), both backends."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence
from typing import Any

from ordo.cdc.ports import SchemaVersion
from ordo.cdc.schema import TableSchema
from ordo.errors import InvalidSchemaError, StorageIntegrityError
from ordo.storage.sql_store import SqlStore

_COLUMNS = "schema_id, table_name, version, schema_json, is_accepted, registered_at"


def _version(row: Any) -> SchemaVersion:
    schema_id, table, version, schema_json, is_accepted, registered_at = row
    of = f"schema id {schema_id} (version {version} of table {table!r})"
    return SchemaVersion(
        schema_id=int(schema_id),
        table=str(table),
        version=int(version),
        schema=_stored_schema(schema_json, of=of),
        is_accepted=bool(is_accepted),
        registered_at=_stored_time(registered_at, of=of),
    )


def _stored_time(epoch_ms: object, *, of: str) -> dt.datetime:
    """The registration time a `cdc_schemas` row stores; StorageIntegrityError when damaged.

    Only add_version's epoch milliseconds are stored, so anything else is a row changed by hand
    or by another program, as a damaged schema_json is (_stored_schema): SQLite keeps text in
    the INTEGER column (the division's TypeError), and a number past datetime's years was its
    ValueError or OverflowError, each a traceback of `ordo cdc schemas list`.
    """
    damaged = f"the stored registered_at of {of} is no time"
    if not isinstance(epoch_ms, int | float):
        msg = f"{damaged}: {epoch_ms!r} is not a number of milliseconds"
        raise StorageIntegrityError(msg)
    try:
        return dt.datetime.fromtimestamp(epoch_ms / 1000, tz=dt.UTC)
    except (ValueError, OverflowError, OSError) as exc:
        msg = f"{damaged}: {epoch_ms} ms is out of range: {exc}"
        raise StorageIntegrityError(msg) from exc


def _stored_schema(text: str | bytes, *, of: str) -> TableSchema:
    """The schema a `cdc_schemas` row stores; StorageIntegrityError naming the row when damaged.

    Only `to_json`'s documents are stored, so text that is no schema document any more (a row
    changed by hand or by another program) is damaged storage: it was from_json's
    InvalidSchemaError, which reads as a bad document the user gave and named neither the
    table nor the version. No retry mends it; from_json's error stays the cause. SQLite keeps a
    BLOB a hand edit stores in the TEXT column (the sqlite3 shell's `readfile()` gives one):
    only text is a stored document, the BLOB was the JSON decoder's TypeError.
    """
    damaged = f"the stored schema_json of {of} is no schema document"
    if isinstance(text, bytes):
        msg = f"{damaged}: a BLOB, not text"
        raise StorageIntegrityError(msg)
    try:
        return TableSchema.from_json(text)
    except InvalidSchemaError as exc:
        msg = f"{damaged}: {exc}"
        raise StorageIntegrityError(msg) from exc


class SqlSchemaStore(SqlStore):
    """SchemaStore on SQL; versions are numbered 1, 2, … per table inside one transaction."""

    def add_version(self, schema: TableSchema, *, is_accepted: bool) -> SchemaVersion:
        """Store `schema` as the table's next version."""
        with self._db.write_transaction() as conn:
            row = conn.execute(
                self._sql(
                    "SELECT COALESCE(MAX(version), 0) FROM cdc_schemas WHERE table_name = {p}"
                ),
                (schema.table,),
            ).fetchone()
            conn.execute(
                self._sql(
                    "INSERT INTO cdc_schemas (table_name, version, schema_json, fingerprint, "
                    "is_accepted, registered_at) VALUES ({p}, {p}, {p}, {p}, {p}, {p})"
                ),
                (
                    schema.table,
                    int(row[0]) + 1,
                    schema.to_json(),
                    schema.fingerprint,
                    is_accepted,
                    time.time_ns() // 1_000_000,
                ),
            )
            found = conn.execute(
                self._sql(
                    f"SELECT {_COLUMNS} FROM cdc_schemas "
                    "WHERE table_name = {p} AND version = {p}"
                ),
                (schema.table, int(row[0]) + 1),
            ).fetchone()
        return _version(found)

    def versions(self, table: str) -> Sequence[SchemaVersion]:
        """Every version of the table, oldest first."""
        rows = self._fetchall(
            f"SELECT {_COLUMNS} FROM cdc_schemas WHERE table_name = {{p}} ORDER BY version",
            (table,),
        )
        return [_version(row) for row in rows]

    def version_by_id(self, schema_id: int) -> SchemaVersion | None:
        """The version with this schema id, or None."""
        row = self._fetchone(
            f"SELECT {_COLUMNS} FROM cdc_schemas WHERE schema_id = {{p}}", (schema_id,)
        )
        return None if row is None else _version(row)

    def mark_accepted(self, table: str, version: int) -> SchemaVersion | None:
        """Accept a reviewed version; None when the table has no such version."""
        with self._db.write_transaction() as conn:
            conn.execute(
                self._sql(
                    "UPDATE cdc_schemas SET is_accepted = {p} "
                    "WHERE table_name = {p} AND version = {p}"
                ),
                (True, table, version),
            )
        found = [v for v in self.versions(table) if v.version == version]
        return found[0] if found else None

    def tables(self) -> Sequence[str]:
        """Every table with a registered schema, sorted."""
        rows = self._fetchall("SELECT DISTINCT table_name FROM cdc_schemas ORDER BY table_name", ())
        return [str(row[0]) for row in rows]
