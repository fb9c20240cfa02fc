"""A batch writer that kills itself with SIGKILL: the child process of test_batch_files.py.

usage: python dying_batch_writer.py ROOT

It replaces batch 0 under ROOT (which must hold it already) and dies as it moves the new batch
directory in: the old one is moved aside by then, so both hidden directories are left.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from ordo.storage.parquet.batch_files import replace_batch

if TYPE_CHECKING:
    from _typeshed import StrOrBytesPath


def main(root: str) -> None:
    rename = os.rename

    def die_moving_in(
        src: StrOrBytesPath,
        dst: StrOrBytesPath,
        *,
        src_dir_fd: int | None = None,
        dst_dir_fd: int | None = None,
    ) -> None:
        """os.rename, except the staged directory's: the process ends as a kill -9 ends it."""
        if isinstance(src, Path) and src.name.endswith(".tmp"):
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        rename(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    print("replacing", flush=True)
    os.rename = die_moving_in  # replace_batch's moves, and nothing else in this process, use it
    replace_batch(root, 0, pa.table({"n": pa.array(range(10), pa.int64())}))


if __name__ == "__main__":
    main(*sys.argv[1:])
