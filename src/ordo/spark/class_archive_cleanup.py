"""Removing the Spark class archives that no start has used for 30 days, with makers' leftovers.

An archive's name holds a digest of the Java, Spark install and JVM options it was made for
(`ordo.spark.class_archive`): after an upgrade of Java or pyspark, `ordo spark archive` makes
another, and the old one (some 200 MB) would stay in the folder for ever. `start_session`
marks the archive it maps as used (its modification time, renewed once a day), and
`ordo spark archive` removes the folder's other archives whose mark is older than
UNUSED_FOR_S. A recent archive of another digest stays: two virtual environments with
different pysparks may share the folder, each starting from its own.

Only names ordo gives are touched: `spark-classes-<digest>-<size>.jsa` (an archive) and
`spark-classes-<digest>.<pid>.partial` (what a maker writes before renaming it). A maker holds
the folder's lock while it writes its partial file, so the removal takes that lock too, and
removes nothing while a maker runs: any partial file found under the lock is a stopped maker's.
"""

from __future__ import annotations

import fcntl
import logging
import re
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ordo.spark.class_archive import LOCK_NAME

logger = logging.getLogger(__name__)

UNUSED_FOR_S = 30 * 86_400.0
"""How long an archive of another Java, Spark or JVM options may go unused before removal."""
_ARCHIVE = re.compile(r"spark-classes-[0-9a-f]{16}-[0-9]+\.jsa")
"""An archive's name (class_archive's `_stem`, then its size)."""
_PARTIAL = re.compile(r"spark-classes-[0-9a-f]{16}\.[0-9]+\.partial")
"""The name of the file a maker's JVM writes the archive to, renamed once whole."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RemovedFile:
    """A file `remove_unused_archives` removed, and its size."""

    path: Path
    size_bytes: int


def remove_unused_archives(folder: Path, *, keep: Path) -> Sequence[RemovedFile]:
    """Remove `folder`'s archives other than `keep` unused for UNUSED_FOR_S, and partial files.

    `ordo spark archive` calls this with the archive it made or found (`keep`, which stays
    however old its mark). Nothing is removed while another process holds the folder's lock (a
    maker runs: the next call removes them). A file that cannot be removed (a read-only folder)
    stays, and so does the rest when the folder cannot be read or locked: this tidies, and never
    raises. Returns the files removed, by name.
    """
    try:
        lock = (folder / LOCK_NAME).open("a")
    except OSError as exc:
        logger.debug("class archives not tidied folder=%s error=%s", folder, exc)
        return []
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # BlockingIOError: a maker is writing its partial file
            logger.debug("class archives not tidied: a maker holds the lock folder=%s", folder)
            return []
        unused_since = time.time() - UNUSED_FOR_S
        removed: list[RemovedFile] = []
        for path in _files(folder):
            if path.name == keep.name:
                continue
            try:
                found = path.lstat()
                is_old = _ARCHIVE.fullmatch(path.name) and found.st_mtime < unused_since
                if stat.S_ISREG(found.st_mode) and (is_old or _PARTIAL.fullmatch(path.name)):
                    path.unlink()
                    logger.info("class archive removed path=%s size_bytes=%d", path, found.st_size)
                    removed.append(RemovedFile(path=path, size_bytes=found.st_size))
            except OSError as exc:
                logger.debug("class archive not removed path=%s error=%s", path, exc)
    return removed


def _files(folder: Path) -> list[Path]:
    """The entries of `folder` with one of ordo's names, by name; none if it cannot be read."""
    try:
        names = sorted(path.name for path in folder.iterdir())
    except OSError as exc:
        logger.debug("class archives not tidied folder=%s error=%s", folder, exc)
        return []
    return [folder / name for name in names if _ARCHIVE.fullmatch(name) or _PARTIAL.fullmatch(name)]
