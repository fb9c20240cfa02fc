"""A capture's change source used in a child made by os.fork, on both backends:
ForkedProcessError before the parent's session or file is touched, and close() in the child
leaves the parent's capture capturing, and holding its source.

A PostgreSQL source's copy used the parent's session as its own (a peek or an advance of the
parent's slot), and its close() released the parent's capture lock and ended the parent's
session: the parent's next call failed, and a second capture of the slot could start. An SQLite
source's calls were refused by its datastore already; its tests guard that.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest

from fork_support import ChildOutcome, assert_refused, in_forked_child
from ordo.cdc.ports import CapturedWindow, ChangeSource
from ordo.errors import AlreadyRunningError
from ordo.storage.change_sources import DEFAULT_SLOT, change_source_at
from ordo.storage.postgres.change_source import PostgresChangeSource
from postgres_source_support import fresh_slot
from sqlite_support import run_sql

CALLS: dict[str, Callable[[ChangeSource, CapturedWindow], object]] = {
    "peek": lambda source, _: source.peek(max_changes=10),
    "advance": lambda source, window: source.advance(up_to=window.up_to),
    "schemas": lambda source, _: source.schemas(),
    "status": lambda source, _: source.status(),
    "snapshot": lambda source, _: list(source.snapshot("items")),
}

SOURCE = r"the (stores of SQLite database|change source of slot 'ordo_\w+' on PostgreSQL at) \S+"


@dataclass(frozen=True, slots=True)
class SourceDatabase:
    """A source database with the table items (id, v), the slot its capture uses, and a way to
    write to it as its application would."""

    url: str
    slot: str
    run: Callable[[str], None]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SourceDatabase]:
    """An SQLite file, or a PostgreSQL schema and a slot of its own (dropped after the test)."""
    if request.param == "sqlite":
        path = tmp_path / "app.db"
        yield SourceDatabase(url=f"sqlite:///{path}", slot=DEFAULT_SLOT, run=partial(run_sql, path))
        return
    dsn: str = request.getfixturevalue("postgres_dsn")
    run: Callable[[str], None] = request.getfixturevalue("run")
    slot = fresh_slot()
    yield SourceDatabase(url=dsn, slot=slot, run=run)
    with PostgresChangeSource(dsn, slot=slot, tables=["items"]) as source:
        source.drop()


def captured_keys(source: ChangeSource) -> list[tuple[object, ...]]:
    """The keys of the changes waiting in `source`."""
    return [mutation.partition_key for mutation in source.peek(max_changes=10).mutations]


@pytest.mark.parametrize("call", CALLS)
def test_a_change_source_used_in_a_forked_child_is_refused(
    database: SourceDatabase, call: str
) -> None:
    database.run("CREATE TABLE items (id INTEGER PRIMARY KEY, v INTEGER)")
    with change_source_at(database.url, ["items"], slot=database.slot) as source:
        database.run("INSERT INTO items VALUES (1, 1)")
        window = source.peek(max_changes=10)

        outcome = in_forked_child(lambda: CALLS[call](source, window))

        assert_refused(outcome, SOURCE)
        assert captured_keys(source) == [(1,)]  # nothing was advanced, the parent goes on


def test_a_change_source_closed_in_a_forked_child_still_captures_in_the_parent(
    database: SourceDatabase,
) -> None:
    database.run("CREATE TABLE items (id INTEGER PRIMARY KEY, v INTEGER)")
    with change_source_at(database.url, ["items"], slot=database.slot) as source:
        closed = in_forked_child(source.close)  # type: ignore[attr-defined]  # not the port's
        database.run("INSERT INTO items VALUES (1, 1)")

        assert closed == ChildOutcome(value=None)  # nothing done: the parent's to close
        assert captured_keys(source) == [(1,)]
        with (
            pytest.raises(AlreadyRunningError),
            change_source_at(database.url, ["items"], slot=database.slot),
        ):
            pass  # the parent's capture still holds its source


@pytest.mark.postgres
def test_a_snapshot_being_read_is_refused_and_left_alone_in_a_forked_child(
    postgres_dsn: str, run: Callable[[str], None]
) -> None:
    """The child's copy of the generator read on, then closed the parent's cursor and session."""
    run("CREATE TABLE items (id INTEGER PRIMARY KEY, v INTEGER)")
    run("INSERT INTO items VALUES (1, 1), (2, 2), (3, 3)")
    slot = fresh_slot()
    with PostgresChangeSource(postgres_dsn, slot=slot, tables=["items"]) as source:
        source.create()
        try:
            rows = source.snapshot("items")
            assert isinstance(rows, Generator)  # one whose copy the child may close
            first = next(rows)

            assert_refused(in_forked_child(lambda: next(rows)), SOURCE)
            assert in_forked_child(rows.close) == ChildOutcome(value=None)

            keys = [first.partition_key] + [mutation.partition_key for mutation in rows]
            assert keys == [(1,), (2,), (3,)]  # the parent's read went on
            assert captured_keys(source) == []  # and its session too
        finally:
            source.drop()
