"""The file system's OSErrors as storage errors: one line saying what failed, where and why.

A change log, a lock file or an SQLite journal that cannot be written ended a command with the
OSError's traceback. An error the file system gives for a permission (or a read-only file
system) is StorageAccessError, which code that rides out outages does not retry: no retry
mends it until someone changes the permissions.
"""

from __future__ import annotations

import errno

from ordo.errors import StorageAccessError, StorageUnavailableError

_REFUSED = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


def file_system_error(doing: str, exc: OSError) -> StorageUnavailableError:
    """`doing` ("cannot write change log /x") failed with `exc`: the error to raise from it.

    The message ends with the OS's reason and the path it was about, which may be deeper than
    the one `doing` names (a partition folder of the change log, a lock file's folder).
    """
    reason = exc.strerror or str(exc)
    if exc.filename is not None:
        reason = f"{reason}: {exc.filename}"
    error = StorageAccessError if exc.errno in _REFUSED else StorageUnavailableError
    return error(f"{doing}: {reason}")
