"""The file system's OSErrors as storage errors: one line saying what failed, where and why.

A change log, a lock file or an SQLite journal that cannot be written ended a command with the
OSError's traceback. An error the file system gives for a permission (or a read-only file
system) is StorageAccessError, which code that rides out outages does not retry: no retry
mends it until someone changes the permissions. So is a path whose file is a folder (EISDIR),
whose folder is a file (ENOTDIR, or EEXIST for a folder to be made): a change-log record or a
lock file that is a folder, a change log under a file. They were outages, which a capture
retried for its `reconnect_timeout`; no retry mends them until someone moves what is in the
way. So is a path that can name no file (`_UNNAMEABLE`): no retry shortens it or breaks its loop;
and one behind a folder this process may not search (`unnameable`).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from ordo.errors import StorageAccessError, StorageUnavailableError

_REFUSED = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})
"""A permission, or a read-only file system."""

_IN_THE_WAY = frozenset({errno.EISDIR, errno.ENOTDIR, errno.EEXIST})
"""A folder where a file should be, or a file where a folder should be.

EEXIST is permanent where ordo's callers see it: they make folders that may exist
(`mkdir(exist_ok=True)`, `made_directory`), which raise it only for a file in the way, and
never create a file exclusively without handling the EEXIST themselves (`link_new`'s callers).
"""

_UNNAMEABLE = frozenset({errno.ENAMETOOLONG, errno.ELOOP})
"""A path that can name no file: a name or the whole path too long, or a symbolic link loop."""

_PERMANENT = _REFUSED | _IN_THE_WAY | _UNNAMEABLE
"""The errno values no retry mends: the one table of them (`file_system_error`, `unnameable`)."""


def file_system_error(doing: str, exc: OSError) -> StorageUnavailableError:
    """`doing` ("cannot write change log /x") failed with `exc`: the error to raise from it.

    The message ends with the OS's reason and the path it was about, which may be deeper than
    the one `doing` names (a partition folder of the change log, a lock file's folder).
    """
    error = StorageAccessError if exc.errno in _PERMANENT else StorageUnavailableError
    return error(f"{doing}: {_reason(exc)}")


def unnameable(path: Path) -> str | None:
    """Why `path` can name no file ("File name too long: /x"), or None when it may name one.

    Looked at before pathlib looks at the path: on a name too long its checks (`exists()`,
    `is_dir()`) raise the bare OSError, and on a symbolic link loop they answer False, so that
    an SQLite journal there was a missing folder or file, outages retried for ever. A folder on
    the way that this process may not search (EACCES) names no file it can reach either, and
    pathlib's checks raised the bare PermissionError. Any other failure of the look (no such
    file) is left to what the caller does next.
    """
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno in _UNNAMEABLE or exc.errno == errno.EACCES:
            return _reason(exc)
    return None


def require_nameable(path: Path, *, doing: str) -> Path:
    """`path`, or StorageAccessError "`doing`: reason" when it can name no file (`unnameable`).

    For a path about to be looked at or listed (`doing`: "cannot read change log /x").
    """
    reason = unnameable(path)
    if reason is not None:
        msg = f"{doing}: {reason}"
        raise StorageAccessError(msg)
    return path


def _reason(exc: OSError) -> str:
    """The OS's reason for `exc`, and the path it was about when it says one."""
    reason = exc.strerror or str(exc)
    return reason if exc.filename is None else f"{reason}: {exc.filename}"
