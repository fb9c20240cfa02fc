"""Raw row mutations as a source delivers them: partial rows, a write time per cell, deletions.

The model follows Cassandra, the hardest source the materializer must handle (seed 003): a write
may carry only some columns, each cell has its own write time (and optional TTL), a row or a whole
partition may be deleted, and the same write may arrive once per replica. PostgreSQL and SQLite
captures produce the same shape with their log position as the write time, so one materializer
serves every source.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import repeat

from ordo import arguments
from ordo.errors import MalformedMutationError

Scalar = None | bool | int | float | str
JsonValue = Scalar | list["JsonValue"] | dict[str, "JsonValue"]
"""A column value as JSON carries it; `None` is a deleted (or null) cell."""
Key = tuple[Scalar, ...]
"""Primary-key values in the table's key column order."""
BIGINT_MIN, BIGINT_MAX = arguments.INT64_MIN, arguments.INT64_MAX
"""The range of the change log's integer columns (write times, positions, schema ids)."""


def check_bigint(label: str, value: object, *, minimum: int = BIGINT_MIN) -> int:
    """`value` when it is an int (not a bool) in minimum..BIGINT_MAX; else MalformedMutationError.

    The change log stores these numbers as BIGINTs: a str or float failed the publish inside
    pyarrow, and 2**64 as an OverflowError, after a new table's partition count was recorded.
    The check is the API's integer check (`ordo.arguments.integer`) with the CDC's error class,
    which is not an InvalidInputError: a capture or an ingested file made the mutation, not a
    caller's argument, and `except CdcError` around a pipeline must catch it.
    """
    return arguments.integer(value, name=label, error=MalformedMutationError, minimum=minimum)


@dataclass(frozen=True, slots=True, kw_only=True)
class Cell:
    """One column of one write. `value=None` deletes the cell (a cell tombstone), as in CQL.

    `write_time` is the source's timestamp for the write (Cassandra: microseconds; PostgreSQL and
    SQLite: the log position, which orders writes to a row the way the database committed them).
    A cell with `ttl_s` stops being live `ttl_s` seconds after `write_time` (microseconds).
    """

    value: JsonValue
    write_time: int
    ttl_s: int | None = None

    def __post_init__(self) -> None:
        """MalformedMutationError unless the write time and TTL are numbers the log can store.

        Every capture, ingestion and the materializer's state build cells, so this is two
        checks and no more (`value` is checked when it is encoded as JSON for the log).
        """
        write_time = self.write_time
        if type(write_time) is not int or not BIGINT_MIN <= write_time <= BIGINT_MAX:
            check_bigint("cell write_time", write_time)  # raises, or accepts an int subclass
        if self.ttl_s is not None:
            check_bigint("cell ttl_s", self.ttl_s, minimum=1)

    @property
    def expires_at(self) -> int | None:
        """The write time at which the cell stops being live, or None when it never expires."""
        return None if self.ttl_s is None else self.write_time + self.ttl_s * 1_000_000

    def is_live(self, now: int) -> bool:
        """Whether the cell holds a value at time `now` (not a tombstone, not expired)."""
        expires_at = self.expires_at
        return self.value is not None and (expires_at is None or now < expires_at)


@dataclass(frozen=True, slots=True, kw_only=True)
class Audit:
    """Where a mutation came from, carried unchanged into the change log and the messages.

    `position` orders mutations of one `segment` (a commit-log file, a replication slot, a
    change table); positions of different segments or replicas are not comparable, and the
    publisher skips a position its log holds for the segment, so replicas must not share one.
    """

    source: str
    replica: str = ""
    segment: str = ""
    position: int = 0
    captured_at_us: int = 0

    def __post_init__(self) -> None:
        """MalformedMutationError unless the texts are str and the numbers non-negative BIGINTs.

        A position names the change log's files and is what deduplication compares, and a
        capture time is a wall-clock time: -1 was written into a file name (`---1--1.parquet`),
        and 2**64 or a text failed the publish deep inside it (OverflowError, TypeError).
        """
        position, captured_at_us = self.position, self.captured_at_us
        if not (  # the usual case, in a few comparisons: captures build an audit per change
            type(position) is int
            and type(captured_at_us) is int
            and 0 <= position <= BIGINT_MAX
            and 0 <= captured_at_us <= BIGINT_MAX
            and type(self.source) is str
            and type(self.replica) is str
            and type(self.segment) is str
        ):
            self._check_fields()

    def _check_fields(self) -> None:
        """MalformedMutationError naming the first field that does not fit (subclasses do)."""
        for name in ("source", "replica", "segment"):
            if not isinstance(value := getattr(self, name), str):
                msg = f"audit {name} must be a string, got {value!r}"
                raise MalformedMutationError(msg)
        check_bigint("audit position", self.position, minimum=0)
        check_bigint("audit captured_at_us", self.captured_at_us, minimum=0)

    @property
    def is_snapshot(self) -> bool:
        """Whether the mutation is a row of an initial snapshot (see `snapshot_segment`)."""
        return SNAPSHOT_MARK in self.segment


SNAPSHOT_MARK = ".snapshot."


def snapshot_segment(segment: str, started_at_us: int) -> str:
    """The audit segment of a snapshot of `segment`'s tables taken at `started_at_us`.

    Its positions are row ordinals, so a snapshot published again (after a crash) is deduplicated
    by the publisher like any segment; the materializer emits its new rows as READ messages.
    """
    return f"{segment}{SNAPSHOT_MARK}{started_at_us}"


def _is_bigint_or_none(value: object) -> bool:
    """Whether an optional BIGINT field holds None or an int in range (bool is no int here)."""
    return value is None or (type(value) is int and BIGINT_MIN <= value <= BIGINT_MAX)


@dataclass(frozen=True, slots=True, kw_only=True)
class Mutation:
    """A single-row update of one table: the unit the publisher routes and the materializer folds.

    `partition_key` and `clustering_key` together are the primary key (a PostgreSQL or SQLite row
    has an empty clustering key). `liveness` is the write time of the row marker an INSERT sets
    (an UPDATE sets none, so a row whose cells are all deleted disappears). `row_deleted_at`
    deletes the row and `partition_deleted_at` every row of the partition: each shadows everything
    written at or before it.
    """

    table: str
    partition_key: Key
    clustering_key: Key = ()
    cells: Mapping[str, Cell] = field(default_factory=dict)
    liveness: Cell | None = None
    row_deleted_at: int | None = None
    partition_deleted_at: int | None = None
    schema_id: int | None = None
    audit: Audit

    def __post_init__(self) -> None:
        """MalformedMutationError for a mutation the publisher or the fold could not use.

        The field types are checked here, once per mutation, because the fold and the
        publisher read them without checking: `cells=[1]` or `liveness=5` was an
        AttributeError there, and a text `row_deleted_at` failed the publish inside pyarrow.
        """
        if not isinstance(self.table, str) or not self.table:
            msg = f"mutation table must be a non-empty string, got {self.table!r}"
            raise MalformedMutationError(msg)
        cells, liveness = self.cells, self.liveness
        if not (  # the usual case: a dict (no ABC check), map(isinstance, ...) looping in C
            (type(cells) is dict or isinstance(cells, Mapping))
            and all(map(isinstance, cells, repeat(str)))
            and all(map(isinstance, cells.values(), repeat(Cell)))
            and (liveness is None or isinstance(liveness, Cell))
            and isinstance(self.audit, Audit)
            and _is_bigint_or_none(self.row_deleted_at)
            and _is_bigint_or_none(self.partition_deleted_at)
            and _is_bigint_or_none(self.schema_id)
        ):
            self._check_fields()
        if not isinstance(self.partition_key, tuple) or not isinstance(self.clustering_key, tuple):
            msg = (  # a string would be split into one key value per character
                f"mutation of table {self.table!r}: keys must be tuples, got "
                f"{self.partition_key!r} and {self.clustering_key!r}"
            )
            raise MalformedMutationError(msg)
        if not self.partition_key:
            msg = f"mutation of table {self.table!r} has no partition key"
            raise MalformedMutationError(msg)
        if (
            not self.cells
            and self.liveness is None
            and self.row_deleted_at is None
            and self.partition_deleted_at is None
        ):
            msg = f"mutation of table {self.table!r} key {self.primary_key!r} changes nothing"
            raise MalformedMutationError(msg)
        if self.partition_deleted_at is not None and (self.cells or self.clustering_key):
            msg = (
                f"partition delete of table {self.table!r} key {self.partition_key!r} "
                "must carry no clustering key and no cells"
            )
            raise MalformedMutationError(msg)

    def _check_fields(self) -> None:
        """MalformedMutationError naming the first field whose type does not fit."""
        where = f"mutation of table {self.table!r}"
        cells = self.cells
        if not isinstance(cells, Mapping) or not all(
            isinstance(column, str) and isinstance(cell, Cell) for column, cell in cells.items()
        ):
            msg = f"{where}: cells must map column names to Cells, got {cells!r}"
            raise MalformedMutationError(msg)
        if self.liveness is not None and not isinstance(self.liveness, Cell):
            msg = f"{where}: liveness must be a Cell or None, got {self.liveness!r}"
            raise MalformedMutationError(msg)
        if not isinstance(self.audit, Audit):
            msg = f"{where}: audit must be an Audit, got {self.audit!r}"
            raise MalformedMutationError(msg)
        for name in ("row_deleted_at", "partition_deleted_at", "schema_id"):
            if (value := getattr(self, name)) is not None:
                check_bigint(f"{where}: {name}", value)

    @property
    def primary_key(self) -> Key:
        """Partition key followed by clustering key."""
        return self.partition_key + self.clustering_key

    @property
    def write_time(self) -> int:
        """The newest write time this mutation carries."""
        times = [cell.write_time for cell in self.cells.values()]
        if self.liveness is not None:
            times.append(self.liveness.write_time)
        times.extend(t for t in (self.row_deleted_at, self.partition_deleted_at) if t is not None)
        return max(times)
