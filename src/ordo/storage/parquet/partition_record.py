"""A table's recorded partition count: `<root>/<table>/_partitions.json`, `{"partitions": n}`.

The change log fixes a table's partition count at its first publish and keeps it here, because
every key's changes must stay in the one partition where deduplication reads them. The record is
written whole and never replaced, so it holds the count of the first publish, or nothing. A log
written before counts were recorded has none: a count is taken for it only if its files fit it
(`require_fit`).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path

from ordo.errors import PartitionCountMismatchError, StorageIntegrityError
from ordo.hashing import stable_hash
from ordo.storage.file_errors import file_system_error
from ordo.storage.parquet.durable_files import fsync_directory, link_new, made_directory
from ordo.storage.parquet.file_reads import read_columns

PARTITIONS_RECORD = "_partitions.json"
"""A table's partition count, `{"partitions": n}`, in its directory; the leading `_` hides it from
Spark's file listing (it is not a data file) and it holds no `=`, which would make it a
partition directory to Spark."""


def read_partition_record(directory: Path) -> int | None:
    """The count recorded in a table's `directory`, or None when it has no record.

    StorageIntegrityError when the record cannot be read as one, StorageUnavailableError when it
    cannot be read at all (StorageAccessError for a permission, which no retry mends: it was
    StorageUnavailableError, ridden out as an outage).
    """
    record = directory / PARTITIONS_RECORD
    try:
        text = record.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):  # no log there (yet)
        return None
    except OSError as exc:
        msg = f"cannot read the partition count of change log {directory}"
        raise file_system_error(msg, exc) from exc
    return _recorded_count(record, text)


def write_partition_record(directory: Path, partitions: int) -> None:
    """Record `partitions` in a table's `directory` (made if missing) unless it holds a record.

    Written whole to a hidden name, synced, and linked into place, which never replaces a record
    another publish wrote meanwhile: the caller reads the record again to compare.
    """
    made_directory(directory)
    record = directory / PARTITIONS_RECORD
    temporary = directory / f".{PARTITIONS_RECORD}.{uuid.uuid4().hex}.tmp"
    try:
        with temporary.open("w", encoding="utf-8") as file:
            json.dump({"partitions": partitions}, file)
            file.flush()
            os.fsync(file.fileno())
        with suppress(FileExistsError):  # another publish recorded one: compared by the caller
            link_new(temporary, record)
    finally:
        temporary.unlink(missing_ok=True)
    fsync_directory(directory)


def require_fit(table: str, partitions: int, files: Iterable[tuple[int, Path]]) -> None:
    """PartitionCountMismatchError unless every key in `files` is where `partitions` puts it.

    `files` are the table's log files with their partitions. Keys are hashed as the publisher
    routes them (`stable_hash` of their JSON text).
    """
    for partition, file in files:
        keys = read_columns(file, ["partition_key"]).column(0).to_pylist()
        for key in dict.fromkeys(keys):
            if stable_hash(key) % partitions != partition:
                raise PartitionCountMismatchError(
                    table=table, recorded=None, requested=partitions, stray=(key, partition)
                )


def _recorded_count(record: Path, text: str) -> int:
    """The count a partitions record holds; StorageIntegrityError when it holds none."""
    try:
        count = json.loads(text)["partitions"]
    except (ValueError, TypeError, KeyError):
        count = None
    if type(count) is not int or count < 1:
        msg = (
            f"{record} does not hold a partition count ({text[:80]!r}); write "
            '{"partitions": <n>} with the count the log was written with'
        )
        raise StorageIntegrityError(msg)
    return count
