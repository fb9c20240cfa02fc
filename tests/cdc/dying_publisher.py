"""A publisher that kills itself with SIGKILL: the child process of test_change_log_crash.py.

usage: python dying_publisher.py CHANGE_LOG

It publishes `killed_window()` with `KILLED_PARTITIONS` partitions and dies at its first rename:
every file of the publish is written and synced under its hidden name, none is in place.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent))  # the tests' support modules

from change_log_support import KILLED_PARTITIONS, killed_window
from ordo.cdc import Publisher
from ordo.storage.parquet import ParquetChangeLog


def die(*_: object, **__: object) -> None:
    """Stand-in for os.replace: the process ends as a kill -9 or a power cut ends it."""
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def main(root: str) -> None:
    print("publishing", flush=True)
    os.replace = die  # the change log's renames, and nothing else in this process, use it
    Publisher(ParquetChangeLog(root), partitions=KILLED_PARTITIONS).publish(killed_window())


if __name__ == "__main__":
    main(*sys.argv[1:])
