"""Single-row mutations column by column: the change log's layout, without a Python object per row.

A capture that builds a `Mutation` per change spends most of its time creating and encoding
objects. `ChangeRows` holds a window's mutations as one list per change log column instead, so
a source that can produce those columns directly (SQLite's change table) skips the objects, and
the publisher routes and writes columns. Sources that decode row by row (wal2json, ingestion)
convert with `ChangeRows.from_mutations`; tools read them back with `mutations()`.

Keys and cells are JSON text. Cells come in two forms: `cells`, a JSON object column ->
{"value", "write_time", "ttl_s"} (the mutation JSON format), and `cell_values`, a JSON object
column -> value for cells that share the write time `cell_values_time` and have no TTL, which is
every cell a PostgreSQL or SQLite capture produces (and most replica writes). A mutation's
cells are both together; `from_mutations` uses the second form whenever it fits, so a mutation
has one encoding whichever path produced it.

Keys and cells are standard JSON both ways (`ordo.cdc.json_text`): a mutation holding NaN or an
infinity is refused when its rows are built, and a change log row holding one (written by a
producer that allowed them) does not decode, so the materializer dead-letters it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from operator import itemgetter
from typing import Any, ClassVar, Self

from ordo.cdc.json_text import parse_json, strict_json
from ordo.cdc.mutation import Audit, Cell, Key, Mutation
from ordo.cdc.mutation_json import cells_from_json, cells_to_json
from ordo.errors import MalformedMutationError
from ordo.journal.validation import check_storable

CHANGE_ROW_COLUMNS = (
    "table",
    "partition_key",
    "clustering_key",
    "cells",
    "cell_values",
    "cell_values_time",
    "liveness_time",
    "liveness_ttl_s",
    "row_deleted_at",
    "partition_deleted_at",
    "schema_id",
    "source",
    "replica",
    "segment",
    "position",
    "captured_at_us",
)
"""The columns of a mutation, in change log order (the log adds `published_at_us`)."""
CHANGE_ROW_TEXT_COLUMNS = frozenset(
    {
        "table",
        "partition_key",
        "clustering_key",
        "cells",
        "cell_values",
        "source",
        "replica",
        "segment",
    }
)
"""The columns that hold text; every other one is a 64-bit integer (or null)."""


@dataclass(frozen=True, slots=True)
class ColumnRows:
    """Rows held as one sequence per column of `NAMES`, all of one length (a base class)."""

    NAMES: ClassVar[tuple[str, ...]] = ()
    columns: Mapping[str, Sequence[Any]]

    def __post_init__(self) -> None:
        lengths = {len(self.columns.get(name, ())) for name in self.NAMES}
        if set(self.columns) != set(self.NAMES) or len(lengths) != 1:
            msg = f"{type(self).__name__} need the columns {self.NAMES}, all of one length"
            raise ValueError(msg)

    @classmethod
    def of_rows(cls, rows: Sequence[tuple[Any, ...]]) -> Self:
        """Rows given as tuples in NAMES order, transposed into columns."""
        transposed = zip(*rows, strict=True) if rows else ((),) * len(cls.NAMES)
        return cls(dict(zip(cls.NAMES, map(list, transposed), strict=True)))

    def __len__(self) -> int:
        return len(self.columns[self.NAMES[0]])

    def column(self, name: str) -> Sequence[Any]:
        """One column's values (KeyError for a name not in NAMES)."""
        return self.columns[name]


def key_text(key: Key) -> str:
    """A key's JSON text as the change log stores it: what routing and the materializer hash.

    ValueError for a NaN or infinite value, which JSON cannot carry.
    """
    return strict_json(list(key))


def _cell_columns(mutation: Mutation) -> tuple[str | None, str | None, int | None]:
    """`cells`, `cell_values`, `cell_values_time` of a mutation (see the module docstring)."""
    cells = mutation.cells
    if not cells:
        return None, None, None
    times = {cell.write_time for cell in cells.values()}
    if len(times) == 1 and all(cell.ttl_s is None for cell in cells.values()):
        values = {column: cell.value for column, cell in cells.items()}
        return None, strict_json(values), times.pop()
    return strict_json(cells_to_json(cells)), None, None


def _row_of(mutation: Mutation) -> tuple[Any, ...]:
    """One mutation's values in CHANGE_ROW_COLUMNS order."""
    liveness, audit = mutation.liveness, mutation.audit
    return (
        mutation.table,
        key_text(mutation.partition_key),
        key_text(mutation.clustering_key),
        *_cell_columns(mutation),
        None if liveness is None else liveness.write_time,
        None if liveness is None else liveness.ttl_s,
        mutation.row_deleted_at,
        mutation.partition_deleted_at,
        mutation.schema_id,
        audit.source,
        audit.replica,
        audit.segment,
        audit.position,
        audit.captured_at_us,
    )


@dataclass(frozen=True, slots=True)
class ChangeRows(ColumnRows):
    """Mutations as one sequence per column of CHANGE_ROW_COLUMNS, all of one length."""

    NAMES = CHANGE_ROW_COLUMNS

    @classmethod
    def from_mutations(cls, mutations: Sequence[Mutation]) -> ChangeRows:
        """The rows of `mutations`, in their order.

        MalformedMutationError for a mutation whose key or cells hold NaN or an infinity: the
        change log would hold text that is not JSON, which no reader downstream can parse; for a
        cell value JSON has no form for (a set or bytes was a bare TypeError); for an audit text
        no store can hold (`_require_storable_audits`); and for an element that is not a
        Mutation (None was an AttributeError). So every check of a mutation's content is done
        here, before the publisher settles or writes anything.
        """
        rows = []
        for mutation in mutations:
            if not isinstance(mutation, Mutation):
                msg = f"only Mutations can be published, got {mutation!r}"
                raise MalformedMutationError(msg)
            try:
                rows.append(_row_of(mutation))
            except (TypeError, ValueError) as exc:  # from the JSON encoder only
                msg = f"mutation of table {mutation.table!r} key {mutation.primary_key!r}: {exc}"
                raise MalformedMutationError(msg) from exc
        built = cls.of_rows(rows)
        _require_storable_audits(built)
        return built

    def take(self, indices: Sequence[int]) -> ChangeRows:
        """The rows at `indices`, in that order (itemgetter: one C call per column)."""
        if len(indices) < 2:  # itemgetter of one index returns the value, not a tuple
            return ChangeRows(
                {name: [values[i] for i in indices] for name, values in self.columns.items()}
            )
        pick = itemgetter(*indices)
        return ChangeRows({name: pick(values) for name, values in self.columns.items()})

    def replaced(self, name: str, values: Sequence[Any]) -> ChangeRows:
        """The same rows with column `name` replaced by `values`."""
        return ChangeRows({**self.columns, name: values})

    def rows(self) -> Iterator[dict[str, Any]]:
        """Row by row, as dicts of column name -> value."""
        for values in zip(*(self.columns[name] for name in CHANGE_ROW_COLUMNS), strict=True):
            yield dict(zip(CHANGE_ROW_COLUMNS, values, strict=True))

    def values(self, index: int) -> tuple[Any, ...]:
        """One row's values in CHANGE_ROW_COLUMNS order (what `mutation_from_values` reads)."""
        return tuple(self.columns[name][index] for name in CHANGE_ROW_COLUMNS)

    def mutations(self) -> list[Mutation]:
        """The rows as Mutations (for tools and tests; the hot paths stay in columns)."""
        columns = (self.columns[name] for name in CHANGE_ROW_COLUMNS)
        return [mutation_from_values(values) for values in zip(*columns, strict=True)]


def _require_storable_audits(rows: ChangeRows) -> None:
    """MalformedMutationError for an audit text that the log or a sink could not store.

    A lone surrogate failed the Parquet write (UnicodeEncodeError) after a new table's partition
    count was recorded, leaving a hidden temporary file behind; a NUL would stop a PostgreSQL
    sink at every restart. The texts repeat, so each distinct one is checked once.
    """
    for name in ("source", "replica", "segment"):
        for text in set(rows.column(name)):
            check_storable(f"audit {name}", text, MalformedMutationError)


def _optional_int(value: object) -> int | None:
    """An integer column that may be null (the materializer hands BIGINTs over as text)."""
    return None if value is None else int(str(value))


@lru_cache(maxsize=4096)
def _key(text: str) -> Key:
    """A key's JSON text as a tuple, decoded once per text.

    A key's rows come together in a batch, and clustering keys repeat across partitions.
    """
    return tuple(parse_json(text))


_OPTIONAL_COLUMNS = frozenset({"cell_values", "cell_values_time"})
"""Columns that rows of change logs written before `cell_values` existed do not have."""
(
    _TABLE,
    _PARTITION_KEY,
    _CLUSTERING_KEY,
    _CELLS,
    _CELL_VALUES,
    _CELL_VALUES_TIME,
    _LIVENESS_TIME,
    _LIVENESS_TTL_S,
    _ROW_DELETED_AT,
    _PARTITION_DELETED_AT,
    _SCHEMA_ID,
    _SOURCE,
    _REPLICA,
    _SEGMENT,
    _POSITION,
    _CAPTURED_AT_US,
) = range(len(CHANGE_ROW_COLUMNS))


def mutation_from_row(row: Mapping[str, object]) -> Mutation:
    """A change row (a change log row, or one that Spark read from it) as a Mutation.

    Raises ValueError (bad JSON, NaN or infinities included, or bad numbers) or
    MalformedMutationError (a field that does not fit); rows of change logs written before
    `cell_values` existed have no such column.
    """
    return mutation_from_values(
        tuple(
            row.get(name) if name in _OPTIONAL_COLUMNS else row[name] for name in CHANGE_ROW_COLUMNS
        )
    )


def mutation_from_values(values: Sequence[object]) -> Mutation:
    """`mutation_from_row` of a row given as its values in CHANGE_ROW_COLUMNS order.

    The materializer's stateful step reads rows as tuples: building a dict per row only to
    read it back cost about a tenth of the step's time.
    """
    cells_text, values_text = values[_CELLS], values[_CELL_VALUES]
    cells = {} if cells_text is None else cells_from_json(parse_json(str(cells_text)))
    if values_text is not None:
        values_time = int(str(values[_CELL_VALUES_TIME]))
        cell_values = parse_json(str(values_text))
        if not isinstance(cell_values, dict):
            msg = f"cell_values must be a JSON object, got {values_text!r}"
            raise ValueError(msg)
        cells.update(
            (str(column), Cell(value=value, write_time=values_time))
            for column, value in cell_values.items()
        )
    liveness_time = values[_LIVENESS_TIME]
    return Mutation(
        table=str(values[_TABLE]),
        partition_key=_key(str(values[_PARTITION_KEY])),
        clustering_key=_key(str(values[_CLUSTERING_KEY])),
        cells=cells,
        liveness=None
        if liveness_time is None
        else Cell(
            value=True,
            write_time=int(str(liveness_time)),
            ttl_s=_optional_int(values[_LIVENESS_TTL_S]),
        ),
        row_deleted_at=_optional_int(values[_ROW_DELETED_AT]),
        partition_deleted_at=_optional_int(values[_PARTITION_DELETED_AT]),
        schema_id=_optional_int(values[_SCHEMA_ID]),
        audit=Audit(
            source=str(values[_SOURCE]),
            replica=str(values[_REPLICA]),
            segment=str(values[_SEGMENT]),
            position=int(str(values[_POSITION])),
            captured_at_us=int(str(values[_CAPTURED_AT_US])),
        ),
    )
