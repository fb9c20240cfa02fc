"""sqlite3's errors as ordo's storage errors: the outages, and what no retry mends.

StorageUnavailableError is an outage, which a tracking processor, a capture or a live query
retries; StorageAccessError (its subclass) is what no retry mends until someone changes the
files, on which they stop. SQLite says "unable to open database file" for both (a process out
of file descriptors, a folder in the file's place): the file system tells them apart.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ordo.errors import (
    StorageAccessError,
    StorageError,
    StorageIntegrityError,
    StorageUnavailableError,
)

IN_MEMORY = ":memory:"
"""The name sqlite3 opens as a new in-memory database, never as a file."""

IN_MEMORY_REFUSAL = "an in-memory database cannot be a journal (it cannot be in WAL mode)"

_BESIDE = ("-wal", "-shm", "-journal")
"""The suffixes of the files SQLite keeps beside a database: WAL, WAL index, rollback journal."""

_OUTAGES = frozenset(
    {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_FULL, sqlite3.SQLITE_PROTOCOL}
)
"""SQLite's result codes for what passes: another process's write lock held past the busy
timeout, a lock race of WAL mode, a full disk. A plain StorageError would end a tracking
processor (`is_outage`), which rides them out."""


def translate_sqlite_error(exc: sqlite3.Error, path: Path) -> StorageError:
    """Map a driver error onto ordo's storage errors (stores may narrow them further).

    A database SQLite may not write (the file or its folder is read-only to this process, or
    the file was replaced under it) is StorageAccessError naming `path`: a tracking processor
    or a capture rode it out as an outage, retrying what no retry mends. So is a file SQLite
    cannot open or read for a folder made beside the database after it was opened (a
    `-journal` folder beside a journal in rollback mode, which `ordo query --live` reads):
    "disk I/O error" was an outage, and the live query retried it for ever.
    """
    text = str(exc)
    if isinstance(exc, sqlite3.IntegrityError):
        return StorageIntegrityError(f"SQLite constraint failed: {text}")
    if isinstance(exc, sqlite3.OperationalError) and "readonly" in text:
        return StorageAccessError(f"SQLite database {path} cannot be written: {text}")
    if isinstance(exc, sqlite3.OperationalError) and (
        "unable to open" in text or "disk I/O" in text
    ):
        msg = f"SQLite database {path} cannot be used: {text}"
        problem = _folder_beside(path)
        if problem is not None:
            return StorageAccessError(f"{msg} ({problem})")
        return StorageUnavailableError(msg)
    code = getattr(exc, "sqlite_errorcode", None) or 0
    if code & 0xFF in _OUTAGES:  # the primary result code of an extended one
        return StorageUnavailableError(f"SQLite database {path} cannot be used now: {text}")
    return StorageError(f"SQLite error: {text}")


def unusable_file_error(
    doing: str, path: Path, exc: sqlite3.Error, *, writes: bool, opened: bool = False
) -> StorageError:
    """`doing` ("cannot open SQLite journal /x") failed with `exc`; the error saying why.

    SQLite says "unable to open database file" for a folder in the file's place and for a
    file or folder this process may not use: the error says which it is. SQLite needs to read
    and write the file, and to create files beside it (its `-wal`, `-shm` or `-journal`) when
    it `writes`; a process that may not is refused with StorageAccessError. So are a folder in
    the file's place, a file that is no SQLite database and `:memory:`: no retry makes them a
    journal. As StorageUnavailableError they were outages, and a tracking processor whose
    thread opened its connection after the journal was replaced by one retried for ever.

    So is a file gone that was `opened` before (by the stores whose new connection this was):
    someone removed or moved it away, which no retry undoes, as a PostgreSQL database that does
    not exist. (A file not there yet, before its first opening, is an outage: `ordo init` or a
    writer may create it. So is any other "unable to open" of a file that is there: a process
    out of file descriptors.)
    """
    msg = f"{doing}: {exc}"
    if path.is_dir():
        return StorageAccessError(f"{msg} ({path} is a folder, not an SQLite file)")
    if opened and not path.exists():
        return StorageAccessError(f"{msg} ({path} was removed or moved away after it was opened)")
    file_access = os.R_OK | os.W_OK if writes else os.R_OK
    if path.exists() and not os.access(path, file_access):
        return StorageAccessError(f"{msg} (permission denied: {path})")
    if writes and not os.access(path.parent, os.W_OK | os.X_OK):
        return StorageAccessError(
            f"{msg} (permission denied: cannot create files in {path.parent})"
        )
    if "readonly" in str(exc) and not writes:  # a read of a WAL journal writes its -shm file
        return StorageAccessError(f"{msg} (SQLite cannot write beside it in {path.parent})")
    if "readonly" in str(exc):  # the file and its folder may be written: SQLite's format says not
        return StorageAccessError(msg)
    if str(path) == IN_MEMORY or getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_NOTADB:
        return StorageAccessError(msg)
    return StorageUnavailableError(msg)


def refuse_folders_beside(path: Path, *, what: str) -> None:
    """StorageAccessError when a folder is where SQLite keeps a file beside `path`.

    SQLite cannot make its `-wal`, `-shm` or `-journal` file there, and what needed one failed
    far from the cause: "unable to open database file" or "disk I/O error" for a file that is
    there, or a write refused as "attempt to write a readonly database" after a read-only check
    had passed, a capture's source was switched to WAL and its journal created. Checked before
    the file is opened, by every opening (`SQLiteDatastore`, `require_journal_file`, a
    capture's source); `what` names the database. No retry mends it until someone removes the
    folder: as StorageUnavailableError, an outage, a live query or a capture retried it.
    """
    problem = _folder_beside(path)
    if problem is not None:
        msg = f"cannot open SQLite {what} {path}: {problem}"
        raise StorageAccessError(msg)


def _folder_beside(path: Path) -> str | None:
    """Which folder is where SQLite keeps a file beside `path`, said in words; None if none."""
    for suffix in _BESIDE:
        beside = Path(f"{path}{suffix}")
        if beside.is_dir():
            return f"{beside} is a folder, not the {suffix} file SQLite keeps beside it"
    return None
