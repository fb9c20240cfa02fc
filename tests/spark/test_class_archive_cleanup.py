"""Which files of a folder of Spark class archives `remove_unused_archives` removes.

No JVM: the archives here are small files with ordo's names, aged with os.utime (the mark of use
`start_session` renews; tests/spark/test_class_archive.py shows a real start renewing it and
`ordo spark archive` removing in a real archive's folder).
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from ordo.spark.class_archive import LOCK_NAME
from ordo.spark.class_archive_cleanup import RemovedFile, remove_unused_archives

DAY_S = 86_400
CURRENT = "spark-classes-00000000000000aa-11.jsa"
OLD = "spark-classes-00000000000000bb-12.jsa"
RECENT = "spark-classes-00000000000000cc-13.jsa"
PARTIAL = "spark-classes-00000000000000dd.4242.partial"
OTHERS = [
    "notes.txt",
    "other.jsa",
    "spark-classes-00000000000000bb-12.jsa.bak",
    "spark-classes-00000000000000b-12.jsa",
    "spark-classes-00000000000000BB-12.jsa",
    "my-spark-classes-00000000000000bb-12.jsa",
    "spark-classes-00000000000000bb.partial",
    LOCK_NAME,
]
"""Files of names ordo does not give its archives (or its lock): never removed, however old."""


def _file(folder: Path, name: str, *, age_days: float) -> Path:
    path = folder / name
    path.write_bytes(bytes(len(name)))
    then = time.time() - age_days * DAY_S
    os.utime(path, (then, then))
    return path


def _folder(tmp_path: Path) -> Path:
    """A folder of the current archive, one of another digest 31 days unused, one 29 days
    unused, a stopped maker's partial file, and files of other names: all but one 40 days old.
    """
    folder = tmp_path / "archives"
    folder.mkdir()
    _file(folder, CURRENT, age_days=40)
    _file(folder, OLD, age_days=31)
    _file(folder, RECENT, age_days=29)
    _file(folder, PARTIAL, age_days=0)
    for name in OTHERS:
        _file(folder, name, age_days=40)
    old_folder = folder / "spark-classes-00000000000000ee-14.jsa"
    old_folder.mkdir()
    os.utime(old_folder, (time.time() - 40 * DAY_S,) * 2)
    return folder


def test_archives_unused_for_30_days_and_partial_files_are_removed(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    removed = remove_unused_archives(folder, keep=folder / CURRENT)
    assert removed == [
        RemovedFile(path=folder / OLD, size_bytes=len(OLD)),
        RemovedFile(path=folder / PARTIAL, size_bytes=len(PARTIAL)),
    ]
    left = sorted(path.name for path in folder.iterdir())
    kept = [CURRENT, RECENT, *OTHERS, "spark-classes-00000000000000ee-14.jsa"]
    assert left == sorted(kept)
    assert remove_unused_archives(folder, keep=folder / CURRENT) == []


def test_nothing_is_removed_while_a_maker_holds_the_lock(tmp_path: Path) -> None:
    """A maker holds the lock while its JVM writes the partial file: that file is not left over."""
    folder = _folder(tmp_path)
    with (folder / LOCK_NAME).open("a") as maker:
        fcntl.flock(maker, fcntl.LOCK_EX)
        assert remove_unused_archives(folder, keep=folder / CURRENT) == []
    assert (folder / OLD).is_file()
    assert (folder / PARTIAL).is_file()
    assert [file.path.name for file in remove_unused_archives(folder, keep=folder / CURRENT)] == [
        OLD,
        PARTIAL,
    ]


def test_a_folder_that_cannot_be_read_removes_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-folder"
    assert remove_unused_archives(missing, keep=missing / CURRENT) == []
    assert not missing.exists()
