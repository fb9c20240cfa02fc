"""The test run's temporary files in memory (tmpfs), where the machine has room for them.

Most tests write SQLite journals, Parquet change logs and checkpoints under `tmp_path`, and
ordo syncs what it commits: on a disk those fsyncs, SQLite's checkpoints and the deletes were
about half the time of the SQLite tests (a sample of 475: 34-39 s on the disk, 15-21 s in
memory, same machine and load). In memory the same calls are made, they only cost nothing,
and a killed process loses nothing there either (the kernel keeps what it wrote). The run's
processes (commands, drivers, bench scripts, the throwaway PostgreSQL) inherit the choice
through TMPDIR. Where there is no such room, or TMPDIR was set by the caller, nothing changes.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

MEMORY = Path("/dev/shm")
"""Linux's tmpfs for shared memory."""
ROOM_BYTES = 4 * 1024**3
"""Free memory it must have: a whole run writes about 0.7 GB there, and pytest keeps only the
folders of failed tests once it ends (`tmp_path_retention_policy` in pyproject.toml)."""


def use_memory_for_temporary_files() -> Path | None:
    """Point TMPDIR (and this process's `tempfile`) at a folder of this user's in memory.

    The folder, or None when TMPDIR is set already or there is no tmpfs with room.
    """
    if "TMPDIR" in os.environ or not _has_room(MEMORY):
        return None
    folder = MEMORY / f"ordo-tests-{os.getuid()}"
    folder.mkdir(mode=0o755, exist_ok=True)  # traversable: the server user's own folder is in it
    os.environ["TMPDIR"] = str(folder)
    tempfile.tempdir = None  # computed again from TMPDIR on next use
    return folder


def _has_room(folder: Path) -> bool:
    try:
        found = os.statvfs(folder)
    except OSError:
        return False
    return os.access(folder, os.W_OK) and found.f_bavail * found.f_frsize >= ROOM_BYTES
