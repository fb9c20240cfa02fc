"""Reading a change log's files: what pyarrow and the file system refuse, as storage errors."""

from __future__ import annotations

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
