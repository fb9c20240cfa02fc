"""An SQLite journal replaced, under open stores, by what can be no journal: no outage.

Each thread opens its own connection at its first call (a processor's worker, the thread a
live query's async iterator reads in), by the journal's path: one that opens it after a folder
or a file that is no SQLite database took the journal's place meets that. It was
StorageUnavailableError, an outage, which a tracking processor retried for ever (a WARNING per
claim interval) while it handled nothing; it is StorageAccessError, on which it stops.

So is a journal removed or moved away, and another SQLite database (without ordo's tables) in
its place: a writer's new connection created a new, empty file at the path, and every read
failed with "no such table", a StorageError retried for ever too.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from contextlib import closing
from dataclasses import replace
from pathlib import Path

import pytest

from ordo import NewEvent, StorageAccessError, init_storage, open_journal
from ordo.processing.processor import TrackingProcessor
from ordo.query import EventEnvelope
from ordo.storage.migration import METADATA_TABLE
from ordo.storage.open import events_by_tag_at, stores_at
from ordo.storage.stores import Stores
from processing_support import FAST, WRITE, source, wait_for

_NOT_SQLITE = "not a database\n" * 100
_REPLACEMENTS = ["folder", "text", "database", "nothing"]


def _replace(path: Path, by: str) -> str:
    """Move the journal at `path` (and the files SQLite keeps beside it) away, and put `by` in
    its place: a folder, a text file, another SQLite database or nothing. The problem the error
    names, after the path."""
    away = path.parent / "away"
    away.mkdir()
    for file in path.parent.glob(f"{path.name}*"):
        file.rename(away / file.name)
    if by == "folder":
        path.mkdir()
        return f": unable to open database file ({path} is a folder, not an SQLite file)"
    if by == "nothing":
        return (
            f": unable to open database file ({path} was removed or moved away after it was opened)"
        )
    if by == "database":
        with closing(sqlite3.connect(path)) as conn:
            conn.execute("CREATE TABLE notes (text TEXT)")
        return (
            f": it has no {METADATA_TABLE} table any more "
            "(another SQLite database was put in its place after it was opened)"
        )
    path.write_text(_NOT_SQLITE)
    return ": file is not a database"


@pytest.mark.parametrize("by", _REPLACEMENTS)
def test_a_processor_started_after_its_journal_was_replaced_is_refused(
    tmp_path: Path, by: str
) -> None:
    """Its worker threads' first connections met the replacement, and the processor stopped.
    Before them start() writes its tokens through the stores' connection, opened before the
    replacement: it wrote them into the file taken away, and now refuses to."""
    path = tmp_path / "j.db"
    init_storage(str(path))
    handled: list[EventEnvelope] = []
    settings = replace(FAST, thread_count=1, initial_segment_count=1)
    with stores_at(str(path)) as stores:
        _replace(path, by)
        processor = TrackingProcessor(
            "p", source(stores), stores.tokens, lambda e, _: handled.append(e), settings=settings
        )
        with pytest.raises(StorageAccessError) as refused:
            processor.start()
    assert str(refused.value) == f"cannot write SQLite journal {path}: {_taken_away(by)}"
    assert not processor.is_running
    assert handled == []
    assert path.exists() == (by != "nothing")  # a journal gone is not created again, empty


def _taken_away(by: str) -> str:
    """What the error of a write says became of the journal once `by` took its place."""
    became = "was removed or moved away" if by == "nothing" else "was replaced by another file"
    return f"it {became} after it was opened (what the store writes would be lost)"


@pytest.mark.parametrize("by", _REPLACEMENTS)
def test_a_live_query_read_in_a_new_thread_refuses_a_journal_replaced_by_what_is_no_journal(
    tmp_path: Path, by: str
) -> None:
    """`live_async` reads in the event loop's worker threads: a new loop's are new threads."""
    path = tmp_path / "j.db"
    init_storage(str(path))

    async def first(tag: str) -> EventEnvelope | None:
        async for envelope in queries.live_async(tag):
            return envelope
        return None

    with events_by_tag_at(str(path)) as queries:
        problem = _replace(path, by)
        with pytest.raises(StorageAccessError) as refused:
            asyncio.run(first("t"))
    assert str(refused.value) == f"cannot open SQLite journal {path}{problem}"
    assert path.exists() == (by != "nothing")


def _take_away(path: Path, by: str) -> None:
    """Move the journal at `path` away, and put another ordo journal in its place unless `by`
    is "nothing"."""
    away = path.parent / "away"
    away.mkdir()
    for file in path.parent.glob(f"{path.name}*"):
        file.rename(away / file.name)
    if by != "nothing":
        init_storage(str(path))


_TAKEN_AWAY = ["nothing", "journal"]


@pytest.mark.parametrize("by", _TAKEN_AWAY)
def test_an_append_through_a_connection_opened_before_the_journal_was_taken_away_is_refused(
    tmp_path: Path, by: str
) -> None:
    """The connection kept the old file open and wrote into it: the events were lost."""
    path = tmp_path / "j.db"
    with open_journal(str(path), settings=WRITE) as journal:
        journal.append("a", [NewEvent.of({"i": 1}, tags=["t"])])  # this thread's connection
        journal.flush()
        _take_away(path, by)
        with pytest.raises(StorageAccessError) as refused:
            journal.append("a", [NewEvent.of({"i": 2}, tags=["t"])], expected_sequence_nr=1)
    assert str(refused.value) == f"cannot write SQLite journal {path}: {_taken_away(by)}"


@pytest.mark.parametrize("by", ["journal", "link loop"])
def test_a_new_connection_refuses_what_was_put_in_the_place_of_the_journal_opened(
    tmp_path: Path, by: str
) -> None:
    """A new thread's connection opened another journal put in its place: the stores used two
    files. A symbolic link loop put there ended the thread with a RuntimeError."""
    path = tmp_path / "j.db"
    init_storage(str(path))
    with stores_at(str(path)) as stores:
        if by == "journal":
            _take_away(path, by)
            problem = _taken_away(by)
        else:
            _take_away(path, "nothing")
            path.symlink_to(path.name)
            problem = f"Too many levels of symbolic links: {path}"
        failures: list[BaseException] = []
        reader = threading.Thread(target=lambda: _read_into(stores, failures))
        reader.start()
        reader.join()
    [refused] = failures
    assert isinstance(refused, StorageAccessError)
    assert str(refused) == f"cannot open SQLite journal {path}: {problem}"


def _read_into(stores: Stores, failures: list[BaseException]) -> None:
    try:
        stores.schema_version()
    except BaseException as exc:  # what ended the thread, for the test to see
        failures.append(exc)


@pytest.mark.parametrize("by", _TAKEN_AWAY)
def test_a_processor_stops_when_its_journal_was_taken_away_under_its_connections(
    tmp_path: Path, by: str
) -> None:
    """Its threads' connections kept the old file open: the tokens went on moving in a file no
    one would read."""
    path = tmp_path / "j.db"
    with open_journal(str(path), settings=WRITE) as journal:
        journal.append("a", [NewEvent.of({"i": 1}, tags=["t"])])
        journal.flush()
    handled: list[EventEnvelope] = []
    settings = replace(FAST, thread_count=1, initial_segment_count=1)
    with stores_at(str(path)) as stores:
        processor = TrackingProcessor(
            "p", source(stores), stores.tokens, lambda e, _: handled.append(e), settings=settings
        )
        with processor:
            wait_for(lambda: len(handled) == 1)  # the worker's connection is open
            _take_away(path, by)
            wait_for(lambda: not processor.is_running)  # its next claim renewal writes
    assert isinstance(processor.failure, StorageAccessError)
    assert str(processor.failure) == f"cannot write SQLite journal {path}: {_taken_away(by)}"
