"""Lock files: one holder at a time, none left once nothing runs."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from fork_support import in_forked_child
from ordo.errors import AlreadyRunningError
from ordo.storage.lock_file import exclusive_lock


def test_a_lock_file_is_removed_when_its_holder_ends(tmp_path: Path) -> None:
    """The file stayed beside the user's database after every run."""
    path = tmp_path / "shop.db-ordo-capture.lock"
    with exclusive_lock(path, "a capture is already running"):
        assert path.exists()
        second = exclusive_lock(path, "a capture is already running")
        with pytest.raises(AlreadyRunningError, match="a capture is already running"):
            second.__enter__()
        assert path.exists()  # the refused copy removed nothing
    assert not path.exists()
    with exclusive_lock(path, "a capture is already running"):
        assert path.exists()


def test_a_forked_child_leaving_the_block_keeps_its_parents_lock(tmp_path: Path) -> None:
    """A raw fork's child unwinds the parent's frames: it removed the file the parent held."""
    path = tmp_path / "shop.db-ordo-capture.lock"
    held = exclusive_lock(path, "a capture is already running")
    held.__enter__()
    assert in_forked_child(lambda: held.__exit__(None, None, None)).error is None
    assert path.exists()
    with pytest.raises(AlreadyRunningError):
        exclusive_lock(path, "a capture is already running").__enter__()
    held.__exit__(None, None, None)
    assert not path.exists()


def test_copies_taking_and_ending_at_once_never_hold_the_lock_together(tmp_path: Path) -> None:
    """A copy that locked a file its holder had just removed must not count as the holder."""
    path = tmp_path / "job.lock"
    holders, most, guard = [0], [0], threading.Lock()

    def take_often() -> None:
        for _ in range(2000):
            try:
                with exclusive_lock(path, "the job is already running"):
                    with guard:
                        holders[0] += 1
                        most[0] = max(most[0], holders[0])
                    time.sleep(0.0001)
                    with guard:
                        holders[0] -= 1
            except AlreadyRunningError:
                pass

    threads = [threading.Thread(target=take_often) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] == 1
    assert not path.exists()
