"""A change log folder this process may not list: StorageAccessError naming it, never a guess.

The root's or a table's folder raised the bare PermissionError, and a partition's was skipped
without a word by pathlib's `glob`: its files were neither counted, read nor looked at for the
positions already published, so a publish wrote them again. The tests run as root, whom a
folder's mode does not stop: `as_unprivileged` gives up the capabilities that let root through.
A folder that is no folder (ENOTDIR) is not refused here: it holds no file of the log, as before
(`settled_partitions` refuses a table's that is a file; writing into one is refused).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from change_log_support import mutation_of
from ordo.cdc import Publisher, partition_of
from ordo.errors import StorageAccessError
from ordo.storage.parquet import ParquetChangeLog
from permission_support import as_unprivileged

_PARTITIONS = 2
_KEY = 1
_PARTITION = partition_of((_KEY,), _PARTITIONS)

_READS: dict[str, Callable[[ParquetChangeLog], object]] = {
    "tables": ParquetChangeLog.tables,
    "partitions": lambda log: log.partitions("users"),
    "files": lambda log: log.files("users"),
    "read": lambda log: list(log.read("users")),
    "last position": lambda log: log.last_position("users", "slot", _PARTITION),
    "summary": lambda log: log.summary("users"),
}


@pytest.fixture
def log(tmp_path: Path) -> ParquetChangeLog:
    """A log with one file in one partition of table `users` (read through a new log object:
    this one knows its last positions without a look)."""
    published = ParquetChangeLog(tmp_path / "log")
    Publisher(published, partitions=_PARTITIONS).publish([mutation_of(_KEY, 1)])
    return published


@pytest.fixture
def locked(log: ParquetChangeLog) -> Iterator[Callable[[Path], Path]]:
    """Takes every permission off a folder (`chmod 000`); gives them back after the test."""
    taken: list[Path] = []

    def lock(folder: Path) -> Path:
        folder.chmod(0)
        taken.append(folder)
        return folder

    yield lock
    for folder in taken:
        folder.chmod(0o755)


@pytest.mark.parametrize("reading", ["read", "last position", "summary", "files"])
def test_a_partition_folder_that_cannot_be_listed_is_refused_not_taken_for_empty(
    log: ParquetChangeLog, locked: Callable[[Path], Path], reading: str
) -> None:
    """`summary` said 0 files and 0 mutations, `read` nothing, `last_position` None."""
    partition = locked(log.table_path("users") / f"partition={_PARTITION}")
    with pytest.raises(StorageAccessError) as refused:
        as_unprivileged(lambda: _READS[reading](ParquetChangeLog(log.root)))
    assert (
        str(refused.value) == f"cannot read change log {log.root}: Permission denied: {partition}"
    )


@pytest.mark.parametrize(
    ("folder", "reading"), [("root", "tables"), ("table", "partitions"), ("table", "read")]
)
def test_a_root_or_table_folder_that_cannot_be_listed_is_no_bare_permission_error(
    log: ParquetChangeLog, locked: Callable[[Path], Path], folder: str, reading: str
) -> None:
    refused_folder = locked(log.root if folder == "root" else log.table_path("users"))
    with pytest.raises(StorageAccessError) as refused:
        as_unprivileged(lambda: _READS[reading](ParquetChangeLog(log.root)))
    assert str(refused.value) == (
        f"cannot read change log {log.root}: Permission denied: {refused_folder}"
    )


def test_a_publish_into_a_partition_it_cannot_list_is_refused_rather_than_repeated(
    log: ParquetChangeLog,
) -> None:
    """A folder it may write in but not list (mode 0o300): the publish found no position
    there and wrote positions 1-2, position 1 a second time, before its sync of the folder
    failed."""
    partition = log.table_path("users") / f"partition={_PARTITION}"
    before = sorted(os.listdir(partition))
    partition.chmod(0o300)
    try:
        republish = Publisher(ParquetChangeLog(log.root), partitions=_PARTITIONS)
        with pytest.raises(StorageAccessError, match=f"Permission denied: {partition}$"):
            as_unprivileged(lambda: republish.publish([mutation_of(_KEY, 1), mutation_of(_KEY, 2)]))
    finally:
        partition.chmod(0o755)
    assert sorted(os.listdir(partition)) == before


def test_the_helper_stops_root_at_a_folder_mode_and_nowhere_else(tmp_path: Path) -> None:
    """What the tests above rest on: `chmod 000` refuses root there, and only there."""
    folder = tmp_path / "folder"
    folder.mkdir()
    folder.chmod(0)
    try:
        with pytest.raises(PermissionError):
            as_unprivileged(lambda: os.listdir(folder))
        assert os.listdir(folder) == []  # this thread is root as before
    finally:
        folder.chmod(0o755)
