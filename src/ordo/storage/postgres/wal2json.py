"""wal2json (format version 2) output as mutations: LSNs, commit-ordered positions, row changes.

Pure: `PostgresChangeSource` fetches the rows and the catalog; this module only decodes them.
With `include-transaction`, every transaction arrives as a `B` row, its changes (`I`, `U`, `D`,
`T`) and a `C` row whose `nextlsn` is the end of the commit record. Transactions filtered out by
`add-tables` still send `B` and `C`, so a window of other tables' writes moves `up_to` on.

Positions. Every mutation's audit position, and the write time of its cells and row marker, grow
strictly in commit order through the slot. The k-th of a transaction's n mutations (k = 1..n)
sits at `commit_end_lsn * POSITIONS_PER_LSN - n + k`. A change's own LSN would not do:
concurrent transactions interleave their WAL records, so a later commit can hold older LSNs (and
a multi-row insert gives many rows one LSN). Two writes of one row are ordered by their commits,
so last-write-wins by position is commit order. A transaction may hold up to POSITIONS_PER_LSN
mutations per WAL byte since the previous commit; only a bigger one that committed right after
a concurrent commit raises CaptureError. Positions fit the change log's int64 until the WAL
reaches 8 PiB (`LAST_LSN`): past it, a capture stops with CaptureError (`position_at`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ordo.cdc.column_type import ColumnType
from ordo.cdc.key_form import key_value_form
from ordo.cdc.mutation import BIGINT_MAX, Audit, Cell, JsonValue, Key, Mutation, Scalar
from ordo.cdc.ports import CapturedWindow
from ordo.cdc.schema import Column, TableSchema, not_json_cell
from ordo.documents import NumberOutOfRangeError
from ordo.errors import CaptureError, InvalidInputError
from ordo.storage.postgres.catalog import to_logical

logger = logging.getLogger(__name__)

POSITIONS_PER_LSN = 1000
"""Audit positions per byte of WAL: room for a transaction's mutations between two commits."""
LAST_LSN = BIGINT_MAX // POSITIONS_PER_LSN
"""The last LSN whose position (`position_at`) fits the change log's int64: 20C49B/A5E353F7."""

SchemaOf = Callable[[str, str], TableSchema]
"""(schema, table) -> the captured table's schema as the catalog had it at the last read."""
TypeOf = Callable[[int], ColumnType | None]
"""A type oid -> its logical type (a domain's base type's), or None when it has none."""
AuditOf = Callable[[int, int], Audit]
"""(position, captured_at_us) -> the audit of a captured mutation."""

_HEX = re.compile(r"[0-9A-Fa-f]{1,8}")
_MAX_LSN = 2**64 - 1
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def parse_lsn(text: str) -> int:
    """The integer of an LSN as PostgreSQL prints it ("16/B374D848")."""
    high, _, low = text.partition("/")
    if not (_HEX.fullmatch(high) and _HEX.fullmatch(low)):
        msg = f"not a PostgreSQL LSN: {text!r}"
        raise InvalidInputError(msg)
    return int(high, 16) << 32 | int(low, 16)


def format_lsn(lsn: int) -> str:
    """An LSN as PostgreSQL prints it (inverse of `parse_lsn`)."""
    if not 0 <= lsn <= _MAX_LSN:
        msg = f"an LSN is a 64-bit unsigned integer, got {lsn}"
        raise InvalidInputError(msg)
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def position_at(lsn: int) -> int:
    """The position of WAL byte `lsn`: `lsn * POSITIONS_PER_LSN`, a commit's last change's.

    CaptureError past LAST_LSN (about 8 PiB of WAL), where no position fits the change log's
    int64: every window failed with `MalformedMutationError: audit position is too large`
    (a snapshot with its write time), which named neither the server nor why.
    """
    if lsn > LAST_LSN:
        msg = (
            f"the server's WAL is at {format_lsn(lsn)}, past {format_lsn(LAST_LSN)}, the last "
            f"position a change can have: a change's position is its commit's LSN times "
            f"{POSITIONS_PER_LSN}, a signed 64-bit integer, so a server's changes can be "
            "captured only in its first 8 PiB of WAL; nothing was published and the slot was "
            "not advanced (see docs/cdc.md, 'Limits')"
        )
        raise CaptureError(msg)
    return lsn * POSITIONS_PER_LSN


@dataclass(frozen=True, slots=True, kw_only=True)
class RowChange:
    """One row's change before it has a position: value columns to write, or None to delete."""

    table: str
    key: Key
    values: Mapping[str, JsonValue] | None
    written: TableSchema | None = None
    """The table's schema as the change shows it was written, when the catalog no longer has
    it (`written_schema`); None when the change fits the catalog's schema."""

    def mutation(self, *, write_time: int, audit: Audit) -> Mutation:
        """The mutation: a row deletion, or a row marker plus a cell per value given."""
        if self.values is None:
            return Mutation(
                table=self.table, partition_key=self.key, row_deleted_at=write_time, audit=audit
            )
        return Mutation(
            table=self.table,
            partition_key=self.key,
            cells={name: Cell(value=v, write_time=write_time) for name, v in self.values.items()},
            liveness=Cell(value=True, write_time=write_time),
            audit=audit,
        )


def row_values(
    schema: TableSchema, columns: Iterable[tuple[str, object, ColumnType | None]]
) -> dict[str, JsonValue]:
    """Column values (key columns too) as their logical types; CaptureError names the column.

    `columns` are (name, raw value, type) with the type the value was written as, or None for
    the column's type in `schema`. wal2json gives each value's type (`typeoid`), which is the
    column's when the change was written: changes made before an `ALTER TABLE` that dropped or
    retyped a column are still read as written, after the catalog moved on.

    JSON holding a number ordo cannot carry (`1e999`) is the application's data, not a broken
    change: refusing it would stop the capture for good. Its text goes under
    `not_json_cell(name)`, which fails every schema, so the materializer dead-letters the change
    naming the column; in a key column (a change written before the column was retyped from
    jsonb: a jsonb key is refused) it is null, and the change is dead-lettered for its key.
    """
    types = {column.name: column.type for column in schema.columns}
    values: dict[str, JsonValue] = {}
    for name, raw, written_as in columns:
        try:
            values[name] = to_logical(written_as or types[name], raw)
        except NumberOutOfRangeError:
            if name in schema.key_names:
                values[name] = None
            else:
                values[not_json_cell(name)] = str(raw)
        except (KeyError, ValueError) as exc:
            msg = f"table {schema.table!r} column {name!r}: cannot read {raw!r} ({exc})"
            raise CaptureError(msg) from exc
    return values


def row_key(schema: TableSchema, values: Mapping[str, JsonValue]) -> Key:
    """The primary-key values in key order, each in its type's one form (`values` hold them all).

    PostgreSQL's `=` holds a double's (or real's) -0.0 and 0.0 as one key, as a sink's key
    column does, while the fold keys a row by its key's JSON text: captured as written, one row
    would be two fold keys. An `UPDATE` from -0.0 to 0.0 logs its old key (it is another
    datum), which compares equal to the new one, so no delete would go out and the fold would
    keep the -0.0 row the source no longer has. Each key value is in its column type's one form
    (`key_value_form`), the form `ordo cdc ingest` writes too.
    """
    by_name = schema.by_name
    return tuple(
        _key_value(schema, by_name[name].type, values[name]) for name in schema.partition_key
    )


def value_cells(schema: TableSchema, values: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """The values of the columns that are not part of the key."""
    return {name: value for name, value in values.items() if name not in schema.partition_key}


def decode_window(
    rows: Sequence[str],
    *,
    confirmed: int,
    schema_of: SchemaOf,
    type_of: TypeOf,
    audit: AuditOf,
    has_more: bool = False,
) -> CapturedWindow:
    """The mutations of every complete transaction in `rows` (wal2json v2 JSON documents).

    `confirmed` is the slot's confirmed LSN: the window's `up_to` when `rows` hold no commit.
    `has_more` is the slot's: whether it stopped at the peek's row limit.

    A logical message emitted outside a transaction (`pg_logical_emit_message(false, ...)`, a
    heartbeat) has no commit, and wal2json sends it at its own LSN (its record's end). A full
    window of such messages alone ends after the last of them: ending at `confirmed`, advancing
    it moved nothing, so every later peek returned the same messages and the capture, reading
    on at once after a full window, never got past them. Only such a window moves past
    messages: elsewhere a window ends at a commit, which the positions of the next window's
    first transaction are checked against.

    Numbers are kept as the text wal2json wrote, which `to_logical` reads as the column's type:
    a numeric keeps PostgreSQL's digits, as a snapshot reads them (a Decimal wrote 0.0000001
    as `1E-7`), however many (Python refuses to convert an integer of more than 4300 digits,
    and wal2json writes 1e5000 out in full).
    """
    mutations: list[Mutation] = []
    written: dict[str, TableSchema] = {}
    up_to = confirmed
    committed = False
    messages_end: int | None = None
    pending: list[RowChange] | None = None
    for row in rows:
        change: dict[str, Any] = json.loads(row, parse_float=str, parse_int=str)
        action = change.get("action")
        if action == "M":  # pg_logical_emit_message(), possibly outside any transaction
            if pending is None and change.get("lsn") is not None:
                messages_end = parse_lsn(str(change["lsn"]))
            continue
        if action == "B":
            pending = []
        elif pending is None:
            msg = f"wal2json sent {action!r} outside a transaction: {row[:200]}"
            raise CaptureError(msg)
        elif action in ("I", "U", "D"):
            pending.extend(_row_changes(change, schema_of, type_of))
        elif action == "T":
            logger.warning(
                "TRUNCATE is not captured; rows stay in the view table=%s.%s",
                change.get("schema"),
                change.get("table"),
            )
        elif action == "C":
            end = parse_lsn(str(change["nextlsn"]))
            first = position_at(end) - len(pending) + 1
            if pending and first <= up_to * POSITIONS_PER_LSN:
                msg = (
                    f"transaction committed at {format_lsn(end)} has {len(pending)} row changes, "
                    f"more than the positions left after {format_lsn(up_to)}"
                )
                raise CaptureError(msg)
            captured_at_us = _micros(change.get("timestamp"))
            mutations.extend(
                rc.mutation(write_time=p, audit=audit(p, captured_at_us))
                for p, rc in enumerate(pending, start=first)
            )
            written.update((rc.written.fingerprint, rc.written) for rc in pending if rc.written)
            up_to, pending, committed = end, None, True
    if has_more and not committed and messages_end is not None:
        up_to = max(up_to, messages_end)
    return CapturedWindow.of(
        mutations, up_to=up_to, has_more=has_more, written=tuple(written.values())
    )


def _row_changes(
    change: Mapping[str, Any], schema_of: SchemaOf, type_of: TypeOf
) -> list[RowChange]:
    """An I, U or D change as row changes (a primary-key UPDATE is a delete plus an insert).

    An UPDATE's new row lacks an unchanged key value that is TOASTed (stored out of line: one
    of more than about 2 kB that does not compress), as it lacks other unchanged TOASTed
    columns, and PostgreSQL logs the key in the old row instead: it is taken from there. Read
    from the new row alone, the first update of any other column of such a row stopped the
    capture for good.
    """
    schema = schema_of(str(change["schema"]), str(change["table"]))
    columns = list(_typed(change.get("columns", ()), type_of))
    new = row_values(schema, columns)
    old = row_values(schema, _typed(change.get("identity", ()), type_of))
    if change["action"] == "D":
        _require_key(schema, change, old)
        return [RowChange(table=schema.table, key=row_key(schema, old), values=None)]
    new.update(
        (name, old[name]) for name in schema.partition_key if name not in new and name in old
    )
    _require_key(schema, change, new)
    key = row_key(schema, new)
    cells = value_cells(schema, new)
    written = written_schema(schema, columns)
    if not all(name in old for name in schema.partition_key) or row_key(schema, old) == key:
        return [RowChange(table=schema.table, key=key, values=cells, written=written)]
    # The key changed: the old row goes, the new one arrives whole. wal2json leaves unchanged
    # TOASTed columns out of the new row; REPLICA IDENTITY FULL has them in the old one.
    absent = [c.name for c in schema.value_columns if c.name not in cells]
    cells.update((name, old[name]) for name in absent if name in old)
    if lost := [name for name in absent if name not in old]:
        logger.warning(
            "primary key update lacks unchanged TOASTed columns (use REPLICA IDENTITY FULL) "
            "table=%s key=%r columns=%s",
            schema.table,
            key,
            lost,
        )
    return [
        RowChange(table=schema.table, key=row_key(schema, old), values=None),
        RowChange(table=schema.table, key=key, values=cells, written=written),
    ]


def _require_key(
    schema: TableSchema, change: Mapping[str, Any], values: Mapping[str, JsonValue]
) -> None:
    """CaptureError when `values`, the row `change` is keyed by, lack a key column of `schema`.

    Every window that reaches such a change fails, so the capture stops at it until the table
    is keyed as the change was. Either the table had another key when the change was written
    (it was dropped and created again with another key, or its key changed, while the slot
    held the change), or the change was logged under a replica identity without the key (a
    delete's or an update's old row, under USING INDEX of another index). The change shows the
    first for sure when it names a column the table lacks, or is an INSERT (which logs every
    column, whatever the identity); giving the table REPLICA IDENTITY DEFAULT, which the error
    advised for both, mends neither: the table has it (or is refused, naming the ALTER TABLE,
    by `read_schema` before each publish). Capturing the table afresh does.
    """
    missing = [name for name in schema.partition_key if name not in values]
    if not missing:
        return
    names = [str(c["name"]) for c in (*change.get("columns", ()), *change.get("identity", ()))]
    if change["action"] == "I" or not set(names) <= set(schema.names):
        why = f"it has columns {sorted(set(names))}, written when the table had another key"
    else:
        why = (
            "it was logged under a replica identity without them or when the table had another key"
        )
    msg = (
        f"a change of table {schema.table!r} lacks key columns {missing}: {why}, and the slot "
        f"cannot move past it while the table is keyed by {list(schema.partition_key)}; "
        "capture the table afresh on another slot with --snapshot and drop this one"
    )
    raise CaptureError(msg)


def written_schema(
    schema: TableSchema, columns: Sequence[tuple[str, object, ColumnType | None]]
) -> TableSchema | None:
    """The schema a new row's `columns` (`_typed`) were written under; None if it is `schema`'s.

    wal2json gives a change with the columns and types its row had when it was written. A
    column the catalog no longer has (added and dropped again between two capture windows), or
    types otherwise, fits no version the capture registered from the catalog: named with one,
    the change was dead-lettered. Its schema is the row's columns in their order, typed as
    written (nullable unless the catalog says otherwise: a dropped column's constraint went with
    it), then the catalog's columns the row lacks (an UPDATE leaves out unchanged TOASTed
    values; an INSERT lacks columns added since), keyed as `schema`.
    """
    by_name = schema.by_name
    if all(
        name in by_name and (typed is None or typed is by_name[name].type)
        for name, _, typed in columns
    ):
        return None
    shown = [
        Column(
            name=name,
            type=typed or by_name[name].type,
            nullable=name not in by_name or by_name[name].nullable,
        )
        for name, _, typed in columns
    ]
    names = {column.name for column in shown}
    rest = [column for column in schema.columns if column.name not in names]
    return dataclasses.replace(schema, columns=(*shown, *rest))


def _typed(
    columns: Iterable[Mapping[str, Any]], type_of: TypeOf
) -> Iterator[tuple[str, object, ColumnType | None]]:
    """wal2json's columns as (name, value, logical type of the value's `typeoid`)."""
    for column in columns:
        oid = column.get("typeoid")
        yield str(column["name"]), column["value"], None if oid is None else type_of(int(oid))


def _key_value(schema: TableSchema, column_type: ColumnType, value: JsonValue) -> Scalar:
    """A key column's value in its one form (see `row_key`); CaptureError for a list or dict."""
    if isinstance(value, list | dict):
        msg = f"table {schema.table!r}: a key value must be a scalar, got {value!r}"
        raise CaptureError(msg)
    return key_value_form(column_type, value)


def _micros(timestamp: object) -> int:
    """A commit timestamp ("2024-01-02 03:04:05.123456+00") in µs since the epoch, else now."""
    try:
        moment = dt.datetime.fromisoformat(str(timestamp))
    except ValueError:
        return time.time_ns() // 1000
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return (moment - _EPOCH) // dt.timedelta(microseconds=1)
