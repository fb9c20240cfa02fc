"""Change messages with full rows (seed 003): what the materializer emits for each real change.

`fold` is the whole materializer for one partition key, with no I/O: it reconciles a mutation into
the partition's state and returns one message per row whose visible content changed, carrying the
full `after` row, the full `before` row (the previous message's `after`), the schema id and the
source position. A replica duplicate, or a write older than what the state holds, changes nothing
and yields no message.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum

from ordo.cdc.cell_names import SAME_NAMES, CellNames
from ordo.cdc.column_type import ColumnType, misfit
from ordo.cdc.json_text import parse_application_json
from ordo.cdc.mutation import Audit, JsonValue, Key, Mutation
from ordo.cdc.retype import retyped_row
from ordo.cdc.row_state import PartitionState
from ordo.cdc.schema import (
    INFINITIES,
    TableSchema,
    full_row,
    is_not_utf8_text,
    not_json_column,
)
from ordo.documents import NumberOutOfRangeError

Row = dict[str, JsonValue]


class ChangeOp(StrEnum):
    """The kind of change a message describes (persisted, so values are strings)."""

    READ = "read"
    """A row of the initial snapshot."""
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeMessage:
    """One change of one row: full `before` (None for CREATE/READ) and `after` (None for DELETE)."""

    table: str
    op: ChangeOp
    key: Key
    before: Row | None
    after: Row | None
    schema_id: int | None
    write_time: int
    audit: Audit


def mutation_problems(mutation: Mutation, schema: TableSchema) -> list[str]:
    """Why `mutation` does not fit `schema` (unknown columns, ill-typed values); [] if it fits."""
    by_name = schema.by_name
    problems: list[str] = []
    if len(mutation.partition_key) != len(schema.partition_key):
        problems.append(f"partition key has {len(mutation.partition_key)} values")
    if mutation.partition_deleted_at is None and len(mutation.clustering_key) != len(
        schema.clustering_key
    ):
        problems.append(f"clustering key has {len(mutation.clustering_key)} values")
    key_columns = zip(schema.primary_key, mutation.primary_key, strict=False)
    for name, value in key_columns:
        key_type = by_name[name].type
        why = f"is not a {key_type.value}" if value is None else misfit(key_type, value)
        if why is not None:
            problems.append(f"key column {name!r}: {value!r} {why}")
    for name, cell in mutation.cells.items():
        column = by_name.get(name)
        if column is None:
            problems.append(_unknown_cell_problem(name, cell.value, schema))
        elif name in schema.key_names:
            problems.append(f"key column {name!r} written as a cell")
        elif cell.value is not None and (why := misfit(column.type, cell.value)) is not None:
            problems.append(f"column {name!r}: {cell.value!r} {why}")
    return problems


def _unknown_cell_problem(name: str, value: JsonValue, schema: TableSchema) -> str:
    """Why a cell that names no column of `schema` does not fit.

    A value the capture set aside (see `not_json_cell`) is reported for the column that held it
    and why it was set aside: what the value is tells (text, `x'<hex>'` for a BLOB, "Infinity"
    or "-Infinity" for an infinite REAL, `not_utf8_text` for text that is not UTF-8).
    """
    column = not_json_column(name, schema)
    if column is None:
        return f"unknown column {name!r}"
    if is_not_utf8_text(value):
        what = "text that is not UTF-8"
    elif column.type is ColumnType.JSON:
        return f"column {column.name!r}: {value!r} {_not_carried_json(value)}"
    else:
        what = "an infinite REAL" if value in INFINITIES else "a BLOB"
    kind = column.type.value
    return f"column {column.name!r}: {value!r} is {what}, which a {kind} column cannot hold"


def _not_carried_json(value: JsonValue) -> str:
    """Why a JSON column's value set aside by the capture is not carried.

    Text that is not JSON, or JSON holding a number beyond a double's range (`1e999`), which
    no reader after the change log could read as the source's value (or an integer longer than
    Python converts).
    """
    try:
        parse_application_json(str(value))
    except NumberOutOfRangeError as exc:
        return f"is JSON that cannot be carried: {exc}"
    except ValueError:
        pass  # malformed text, NaN or an infinity
    return "is not JSON text"


def _op(before: Row | None, after: Row | None) -> ChangeOp:
    if before is None:
        return ChangeOp.CREATE
    return ChangeOp.DELETE if after is None else ChangeOp.UPDATE


def _shown(
    schema: TableSchema,
    key: Key,
    values: Mapping[str, JsonValue],
    cells: CellNames,
    retyped: Collection[str],
) -> Row:
    """A row's visible state `values` as a message of `schema`'s version shows them."""
    row = full_row(schema, key, cells.shown(values))
    if retyped:
        retyped_row(row, schema, retyped, key=key)
    return row


def fold(
    state: PartitionState,
    mutation: Mutation,
    schema: TableSchema,
    *,
    cells: CellNames = SAME_NAMES,
    retyped: Collection[str] = (),
) -> tuple[PartitionState, list[ChangeMessage]]:
    """Reconcile `mutation` into `state`; return the new state and a message per changed row.

    Rows the mutation does not name are compared too where they can have changed: every row on a
    partition delete, and rows with a TTL when event time moved on (they may have expired).
    `cells` are the cell names of `schema`'s version (`ordo.cdc.cell_names`): where its writes
    of a column dropped and added again go, and where messages read such a column, so the cells
    written before the drop are never shown again. `retyped` are the columns another version
    of the table types otherwise: messages show their values in `schema`'s types
    (`retyped_row`), whichever version wrote them, and a value that does not convert raises
    UnconvertibleValueError (the state keeps what was written, so the fold stays
    order-independent).
    """
    write_time = mutation.write_time
    merged = state.merged(cells.stored(mutation), write_time=write_time)
    if mutation.partition_deleted_at is not None:
        touched = sorted(merged.rows, key=repr)
    else:
        touched = [mutation.clustering_key]
        if merged.now > state.now:
            touched.extend(
                sorted(
                    (ck for ck, row in merged.rows.items() if row.is_expiring and ck != touched[0]),
                    key=repr,
                )
            )
    messages = []
    for clustering_key in touched:
        before_values = state.visible(clustering_key)
        after_values = merged.visible(clustering_key)
        if before_values == after_values:
            continue
        key = mutation.partition_key + clustering_key
        before = (
            None if before_values is None else _shown(schema, key, before_values, cells, retyped)
        )
        after = None if after_values is None else _shown(schema, key, after_values, cells, retyped)
        if before == after:
            continue
        messages.append(
            ChangeMessage(
                table=mutation.table,
                op=_op(before, after),
                key=key,
                before=before,
                after=after,
                schema_id=mutation.schema_id,
                write_time=write_time,
                audit=mutation.audit,
            )
        )
    return merged, messages
