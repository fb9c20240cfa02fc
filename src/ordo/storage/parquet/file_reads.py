"""Listing and reading a change log: what pyarrow and the file system refuse, as storage errors."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa

from ordo.errors import StorageIntegrityError
from ordo.storage.file_errors import file_system_error


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
