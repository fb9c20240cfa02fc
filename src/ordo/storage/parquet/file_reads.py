"""Listing and reading a change log: what pyarrow and the file system refuse, as storage errors."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ordo.errors import StorageIntegrityError
from ordo.storage.file_errors import file_system_error
from ordo.storage.parquet.log_schema import CHANGE_LOG_COLUMNS, CHANGE_LOG_SCHEMA


@contextmanager
def reading(file: Path) -> Iterator[None]:
    """Raise a change log file that cannot be read as one storage error naming the file.

    A file that is not Parquet (a stray or truncated `.parquet`), or one this process may not
    read, ended `ordo cdc status` with pyarrow's traceback.
    """
    try:
        yield
    except OSError as exc:
        msg = f"cannot read change log file {file}"
        raise file_system_error(msg, exc) from exc
    except pa.ArrowException as exc:
        msg = f"change log file {file} cannot be read as one: {exc}"
        raise StorageIntegrityError(msg) from exc


def read_columns(file: Path, names: Sequence[str]) -> pa.Table:
    """The columns `names` of a change log file, in that order.

    StorageIntegrityError names the file when it lacks one of them or is not Parquet. Read with
    `pq.ParquetFile`, as every read of the log is: `pq.read_table` imports `pyarrow.dataset`,
    whose import makes a pyarrow scalar, and so imports pandas (0.3 s, see `arrow_columns`).
    """
    with reading(file), pq.ParquetFile(file) as parquet:
        table = parquet.read(columns=names)
    missing = [name for name in names if name not in table.column_names]
    if missing:
        msg = f"change log file {file} cannot be read as one: it has no column {missing[0]!r}"
        raise StorageIntegrityError(msg)
    return table.select(names)


def read_log_file(file: Path) -> pa.Table:
    """Every row of a change log file as CHANGE_LOG_SCHEMA.

    The columns of a later layout that the file lacks (`cell_values`, `cell_values_time`) are
    nulls, and columns not of the schema are left out, as `pq.read_table` with the schema did.
    StorageIntegrityError names a file that is not Parquet, or has a column of another type.
    """
    with reading(file), pq.ParquetFile(file) as parquet:
        table = parquet.read(columns=CHANGE_LOG_COLUMNS)
        held = set(table.column_names)
        columns = [
            table.column(f.name) if f.name in held else pa.nulls(table.num_rows, f.type)
            for f in CHANGE_LOG_SCHEMA
        ]
        return pa.Table.from_arrays(columns, names=CHANGE_LOG_COLUMNS).cast(CHANGE_LOG_SCHEMA)


def listed(folder: Path, *, doing: str) -> dict[str, bool]:
    """Each entry of `folder` by name, True for a folder; none for a missing folder or a file.

    A folder of the log this process may not list ended `ordo cdc status` with the bare
    PermissionError (the root's or a table's), or was skipped without a word by pathlib's
    `glob`: a partition's files went uncounted and unread, and a publish found no position
    there and wrote positions the log held again. Such a folder is `doing`'s storage error
    (StorageAccessError) naming it.
    """
    try:
        with os.scandir(folder) as entries:
            return {entry.name: entry.is_dir() for entry in entries}
    except (FileNotFoundError, NotADirectoryError):
        return {}
    except OSError as exc:
        raise file_system_error(doing, exc) from exc
