"""A RAM-backed folder for tests that write and delete many small files in a loop.

The sweeps that interrupt a command or a tool at each point of its run start it again from the
same stored state hundreds of times: on a disk their fsyncs, SQLite's checkpoints and the
deletes were most of their time. In memory the same calls are made (a sweep counts the same C
calls), they only cost nothing. Where the system has no such folder, the test's own is used.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MEMORY = Path("/dev/shm")
"""Linux's tmpfs for shared memory, writable by every user."""


@contextmanager
def memory_folder(fallback: Path) -> Iterator[Path]:
    """A fresh folder in memory, removed after the block; `fallback` where there is none."""
    if not MEMORY.is_dir():
        yield fallback
        return
    with tempfile.TemporaryDirectory(dir=MEMORY, prefix="ordo-test-") as folder:
        yield Path(folder)
