"""A compaction that kills itself with SIGKILL: a child process of test_change_log_crash.py.

usage: python dying_compactor.py CHANGE_LOG

It compacts table "users" of CHANGE_LOG and dies at its first removal of a file: the first
merged file is linked into place and its folder synced, none of its originals is removed yet.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from ordo.storage.parquet import ParquetChangeLog
from ordo.storage.parquet.compaction import compact_table


def die(*_: object, **__: object) -> None:
    """Stand-in for os.unlink: the process ends as a kill -9 or a power cut ends it."""
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def main(root: str) -> None:
    print("compacting", flush=True)
    os.unlink = die  # a compaction's removals, and nothing before them in this process, use it
    compact_table(ParquetChangeLog(Path(root)), "users", max_rows=1_000)


if __name__ == "__main__":
    main(*sys.argv[1:])
