"""The file system's OSErrors as storage errors: one line saying what failed, where and why.

A change log, a lock file or an SQLite journal that cannot be written ended a command with the
OSError's traceback. An error the file system gives for a permission (or a read-only file
system) is StorageAccessError, which code that rides out outages does not retry: no retry
mends it until someone changes the permissions. So is a path whose file is a folder (EISDIR),
whose folder is a file (ENOTDIR, or EEXIST for a folder to be made): a change-log record or a
lock file that is a folder, a change log under a file. They were outages, which a capture
retried for its `reconnect_timeout`; no retry mends them until someone moves what is in the
way.
"""

from __future__ import annotations

import errno

from ordo.errors import StorageAccessError, StorageUnavailableError

_REFUSED = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})
"""A permission, or a read-only file system."""

_IN_THE_WAY = frozenset({errno.EISDIR, errno.ENOTDIR, errno.EEXIST})
"""A folder where a file should be, or a file where a folder should be.

EEXIST is permanent where ordo's callers see it: they make folders that may exist
(`mkdir(exist_ok=True)`, `made_directory`), which raise it only for a file in the way, and
never create a file exclusively without handling the EEXIST themselves (`link_new`'s callers).
"""


def file_system_error(doing: str, exc: OSError) -> StorageUnavailableError:
    """`doing` ("cannot write change log /x") failed with `exc`: the error to raise from it.

    The message ends with the OS's reason and the path it was about, which may be deeper than
    the one `doing` names (a partition folder of the change log, a lock file's folder).
    """
    reason = exc.strerror or str(exc)
    if exc.filename is not None:
        reason = f"{reason}: {exc.filename}"
    permanent = exc.errno in _REFUSED | _IN_THE_WAY
    error = StorageAccessError if permanent else StorageUnavailableError
    return error(f"{doing}: {reason}")
