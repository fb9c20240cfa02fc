"""A page of tag_views rows packed by the database into one string per column.

Spark's source reads a tag's rows by the hundred thousand (keys on the driver to plan, whole
rows in the executors). Fetched as rows, each costs a Python tuple and an object per value,
more than the database's own read. Packed, the database concatenates each column of the page
(`group_concat` on SQLite, `string_agg` on PostgreSQL): keys and blobs come joined as bytes
(blobs with their byte lengths beside them), texts as UTF-8 with a separator byte between
them, numbers as decimals. That is what an Arrow column is made of (a data buffer and
offsets, which the lengths or the separators' places give), so ordo.spark builds Arrow
columns from them without a per-row step.

Why not an ADBC driver (Arrow straight from the database): adbc-driver-sqlite links its own
copy of SQLite, and two copies of SQLite in one process that open the same file corrupt it
when one closes a file descriptor (POSIX locks are per process; sqlite.org/howtocorrupt.html
2.2.1). Spark's driver runs the planner next to the journal's own connections; this test
suite saw "database disk image is malformed" within seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from ordo.query.ports import TagViewPage


class Packing(Enum):
    """How a column is packed."""

    KEY = "key"
    """16-byte blobs (sortable TimeUUIDs): joined, count * 16 bytes."""
    INT = "int"
    """Integers: decimals joined by commas, left for the caller to parse in bulk."""
    TEXT = "text"
    """Text: UTF-8 joined, TEXT_SEPARATOR between two values."""
    NULLABLE_TEXT = "nullable_text"
    """Text or NULL: as TEXT (NULL as empty), with a flag per row."""
    BLOB = "blob"
    """Bytes: joined, with the lengths."""


TEXT_SEPARATOR = 0xFF
"""The byte between two packed texts: UTF-8 never uses it, and ordo stores only UTF-8 text
(ordo.journal.validation.check_storable), so no value can hold it, whatever its characters.
One aggregate per text column instead of the bytes plus the lengths: SQLite's packing of a
page of whole rows takes about a fifth less time."""

TAG_VIEW_KEY_PACKING = (
    ("timeuuid", Packing.KEY),
    ("persistence_id", Packing.TEXT),
    ("tag_pid_sequence_nr", Packing.INT),
)
"""The key columns of tag_views, packed (what a planner reads)."""
TAG_VIEW_PACKING = (
    *TAG_VIEW_KEY_PACKING,
    ("sequence_nr", Packing.INT),
    ("serializer", Packing.TEXT),
    ("manifest", Packing.TEXT),
    ("payload", Packing.BLOB),
    ("metadata", Packing.NULLABLE_TEXT),
    ("tags", Packing.TEXT),
)
"""The columns of an EventEnvelope, packed (what an executor reads), in its field order."""


@dataclass(frozen=True, slots=True)
class PackDialect:
    """The SQL a backend packs with; each template takes the expression as `{}`."""

    join_text: str
    """Texts joined by a separator given as `{sep}`."""
    join_bytes: str
    """Blobs joined, as one blob."""
    join_utf8: str
    """Texts as UTF-8 joined with TEXT_SEPARATOR between them, as one blob."""
    length: str
    """A blob's length in bytes."""
    as_text: str


SQLITE_PACKING = PackDialect(
    join_text="group_concat({}, {sep})",
    join_bytes="CAST(group_concat({}, '') AS BLOB)",  # blobs pass through byte for byte
    join_utf8="CAST(group_concat({}, x'ff') AS BLOB)",  # texts are stored as UTF-8 here
    length="length({})",
    as_text="CAST({} AS TEXT)",
)
POSTGRES_PACKING = PackDialect(
    join_text="string_agg({}, {sep})",
    join_bytes="string_agg({}, ''::bytea)",
    join_utf8="string_agg(convert_to({}, 'UTF8'), '\\xff'::bytea)",
    length="octet_length({})",
    as_text="CAST({} AS TEXT)",
)


@dataclass(frozen=True, slots=True)
class PackedRows:
    """A page of rows, column by column."""

    count: int
    keys: dict[str, bytes] = field(default_factory=dict)
    """KEY columns: count * 16 bytes."""
    ints: dict[str, str] = field(default_factory=dict)
    """INT columns: decimals joined by commas."""
    texts: dict[str, bytes] = field(default_factory=dict)
    """TEXT and NULLABLE_TEXT columns: the UTF-8 texts joined, TEXT_SEPARATOR between two."""
    blobs: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    """BLOB columns: the bytes joined, and their lengths (decimals joined by commas)."""
    nulls: dict[str, str] = field(default_factory=dict)
    """NULLABLE_TEXT columns: "1" for a NULL, "0" otherwise, one character per row."""


class PackedPageReader(Protocol):
    """Reads a page of a (tag, bucket) packed; both SQL tag view stores are one."""

    def read_packed(self, page: TagViewPage, columns: Sequence[tuple[str, Packing]]) -> PackedRows:
        """The page's rows (all of TagViewPage, persistence_id and hash_mask too), packed."""
        ...


def packing_query(dialect: PackDialect, inner: str, columns: Sequence[tuple[str, Packing]]) -> str:
    """The aggregate over `inner` (a SELECT of the columns) that packs the page."""
    parts = ["count(*)"]
    for name, packing in columns:
        if packing is Packing.KEY:
            parts.append(dialect.join_bytes.format(name))
            continue
        if packing is Packing.INT:
            parts.append(dialect.join_text.format(dialect.as_text.format(name), sep="','"))
            continue
        if packing is Packing.BLOB:
            parts.append(dialect.join_bytes.format(name))
            length = dialect.as_text.format(dialect.length.format(name))
            parts.append(dialect.join_text.format(length, sep="','"))
            continue
        parts.append(dialect.join_utf8.format(f"coalesce({name}, '')"))
        if packing is Packing.NULLABLE_TEXT:
            flag = f"CASE WHEN {name} IS NULL THEN '1' ELSE '0' END"
            parts.append(dialect.join_text.format(flag, sep="''"))
    return f"SELECT {', '.join(parts)} FROM ({inner}) page"


def unpack(row: Sequence[Any], columns: Sequence[tuple[str, Packing]]) -> PackedRows:
    """The aggregate's row as PackedRows (no rows: every column empty)."""
    packed = PackedRows(int(row[0]))
    values = iter(row[1:])
    for name, packing in columns:
        value = next(values)
        if packing is Packing.KEY:
            packed.keys[name] = bytes(value or b"")
        elif packing is Packing.INT:
            packed.ints[name] = value or ""
        elif packing is Packing.BLOB:
            packed.blobs[name] = (bytes(value or b""), next(values) or "")
        else:
            packed.texts[name] = bytes(value or b"")
            if packing is Packing.NULLABLE_TEXT:
                packed.nulls[name] = next(values) or ""
    return packed


def joined(
    first: PackedRows, second: PackedRows, columns: Sequence[tuple[str, Packing]]
) -> PackedRows:
    """The rows of `first`, then those of `second`, packed as one page."""
    if not first.count or not second.count:
        return second if not first.count else first
    packed = PackedRows(first.count + second.count)
    separator = bytes([TEXT_SEPARATOR])
    for name, packing in columns:
        if packing is Packing.KEY:
            packed.keys[name] = first.keys[name] + second.keys[name]
        elif packing is Packing.INT:
            packed.ints[name] = f"{first.ints[name]},{second.ints[name]}"
        elif packing is Packing.BLOB:
            (data, lengths), (more, more_lengths) = first.blobs[name], second.blobs[name]
            packed.blobs[name] = (data + more, f"{lengths},{more_lengths}")
        else:
            packed.texts[name] = first.texts[name] + separator + second.texts[name]
            if packing is Packing.NULLABLE_TEXT:
                packed.nulls[name] = first.nulls[name] + second.nulls[name]
    return packed
