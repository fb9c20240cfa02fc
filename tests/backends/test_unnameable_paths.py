"""Paths that can name no file (a name too long, a symbolic link loop): no outage, named.

A journal, a change log or a lock file at such a path failed with the bare OSError of
pathlib's looks (a name too long), or as an outage (a missing folder or file, "unable to open
database file", a lock file that cannot be taken), which a tracking processor, a capture or a
live query retried for ever. Neither a retry nor `ordo init` makes such a path name a file: it
is StorageAccessError, and the message names the path and the OS's reason.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ordo import StorageAccessError, init_storage
from ordo.storage.location import existing_location
from ordo.storage.lock_file import exclusive_lock
from ordo.storage.open import stores_at
from ordo.storage.parquet.change_log import ParquetChangeLog
from ordo.storage.sqlite.change_source import check_capturable, read_status
from permission_support import locked_out

_LONG_NAME = "n" * 300
"""Longer than any file system's longest name (255 bytes on Linux)."""

_LOOP = "Too many levels of symbolic links"
_TOO_LONG = "File name too long"


def _unnameable(tmp_path: Path, kind: str) -> tuple[Path, str]:
    """A path that can name no file, of `kind`; the OS's reason, as a message ends with it."""
    if kind == "link loop":
        path = tmp_path / "j.db"
        path.symlink_to(path.name)
        return path, f"{_LOOP}: {path}"
    if kind == "link loop above":
        (tmp_path / "data").symlink_to("data")
        path = tmp_path / "data" / "j.db"
        return path, f"{_LOOP}: {path}"
    if kind == "name too long":
        path = tmp_path / f"{_LONG_NAME}.db"
        return path, f"{_TOO_LONG}: {path}"
    path = tmp_path / _LONG_NAME / "j.db"
    return path, f"{_TOO_LONG}: {path}"


_KINDS = ["link loop", "link loop above", "name too long", "folder name too long"]

_OPENINGS: dict[str, Callable[[str], object]] = {
    "stores": lambda url: stores_at(url).__enter__(),
    "existing journal": existing_location,
    "init": init_storage,
}


@pytest.mark.parametrize("opening", _OPENINGS)
@pytest.mark.parametrize("kind", _KINDS)
def test_a_journal_at_a_path_that_can_name_no_file_is_refused(
    tmp_path: Path, kind: str, opening: str
) -> None:
    """A name too long raised the bare OSError; a loop was a missing folder or file."""
    path, reason = _unnameable(tmp_path, kind)
    with pytest.raises(StorageAccessError) as refused:
        _OPENINGS[opening](f"sqlite:///{path}")
    assert str(refused.value) == f"no journal at {path}: {reason}"


@pytest.mark.parametrize("opening", _OPENINGS)
def test_a_journal_in_a_folder_this_process_may_not_search_is_refused(
    tmp_path: Path, opening: str
) -> None:
    """pathlib's look at the path raised the bare PermissionError."""
    folder = tmp_path / "locked"
    folder.mkdir()
    url = f"sqlite:///{folder / 'j.db'}"
    init_storage(url)
    with pytest.raises(StorageAccessError) as refused:
        locked_out(folder, lambda: _OPENINGS[opening](url))
    path = folder / "j.db"
    assert str(refused.value) == f"no journal at {path}: Permission denied: {path}"


@pytest.mark.parametrize("kind", ["link loop", "name too long", "folder name too long"])
def test_a_lock_file_at_a_path_that_can_name_no_file_is_refused(tmp_path: Path, kind: str) -> None:
    """It was StorageUnavailableError, which a capture retried for its reconnect timeout.

    A folder name too long is met making the lock file's folders: the reason names that folder.
    """
    path, reason = _unnameable(tmp_path, kind)
    if kind == "folder name too long":
        reason = f"{_TOO_LONG}: {path.parent}"
    with (
        pytest.raises(StorageAccessError) as refused,
        exclusive_lock(path, "a capture is already running"),
    ):
        pass
    assert str(refused.value) == f"cannot take the lock file {path}: {reason}"


@pytest.mark.parametrize("kind", ["name too long", "folder name too long"])
def test_a_change_log_whose_name_is_too_long_is_refused(tmp_path: Path, kind: str) -> None:
    """It ended a capture with the bare OSError of a look at which of its folders exist."""
    root, reason = _unnameable(tmp_path, kind)
    with pytest.raises(StorageAccessError) as refused, ParquetChangeLog(root).root_made():
        pass
    assert str(refused.value) == f"cannot create the directory of change log {root}: {reason}"
    assert list(tmp_path.iterdir()) == []


_READS: dict[str, Callable[[ParquetChangeLog], object]] = {
    "tables": ParquetChangeLog.tables,
    "read": lambda log: list(log.read("t")),
    "partitions": lambda log: log.partitions("t"),
    "last position": lambda log: log.last_position("t", "s", 0),
    "settled partitions": lambda log: log.settled_partitions("t", requested=None, default=1),
}


@pytest.mark.parametrize("reading", _READS)
@pytest.mark.parametrize("kind", _KINDS)
def test_reading_a_change_log_at_a_path_that_can_name_no_file_is_refused(
    tmp_path: Path, kind: str, reading: str
) -> None:
    """`ordo status` and `ordo cdc status` ended with the bare OSError of a name too long, and
    showed a log in a symbolic link loop as holding no table."""
    root, _ = _unnameable(tmp_path, kind)
    looked_at = {"tables": root, "last position": root / "t" / "partition=0"}.get(
        reading, root / "t"
    )
    reason = _LOOP if "loop" in kind else _TOO_LONG
    with pytest.raises(StorageAccessError) as refused:
        _READS[reading](ParquetChangeLog(root))
    assert str(refused.value) == f"cannot read change log {root}: {reason}: {looked_at}"


@pytest.mark.parametrize("reading", [check_capturable, read_status])
@pytest.mark.parametrize("kind", _KINDS)
def test_a_cdc_source_at_a_path_that_can_name_no_file_is_refused(
    tmp_path: Path, kind: str, reading: Callable[[Path, list[str]], object]
) -> None:
    """A name too long raised the bare OSError; a loop was "no SQLite database" to capture."""
    path, reason = _unnameable(tmp_path, kind)
    with pytest.raises(StorageAccessError) as refused:
        reading(path, ["t"])
    assert str(refused.value) == f"no SQLite database at {path} to capture: {reason}"
