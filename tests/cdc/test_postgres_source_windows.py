"""A PostgreSQL change source's windows: peek consumes nothing, advance moves past, a
transaction is never split, a backlog is drained, a crash before advancing publishes nothing
twice; its slot's status, and a dropped slot or a refused server.

A window's `up_to` may move with nothing written by a test: the server's own transactions
(autovacuum's ANALYZE of the catalog tables the tests' schemas churn) commit at any time, and
wal2json sends their begin and commit, so a window ends past them.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from ordo.cdc.capture import Capture as CaptureRunner
from ordo.cdc.ports import CapturedWindow, ChangeSource
from ordo.cdc.publisher import Publisher
from ordo.cdc.schema_registry import SchemaRegistry
from ordo.errors import ReplicationSlotMissingError, StorageAccessError
from ordo.settings import CaptureSettings
from ordo.storage.open import stores_at
from ordo.storage.parquet.change_log import ParquetChangeLog
from ordo.storage.postgres.change_source import PostgresChangeSource
from postgres_source_support import Capture, slot_count, summary

pytestmark = pytest.mark.postgres


def test_peek_consumes_nothing_and_advance_moves_past_a_window(
    run: Callable[..., None], capture: Capture
) -> None:
    run("CREATE TABLE users (id int PRIMARY KEY)")
    source = capture("users")
    run("INSERT INTO users VALUES (1)")
    run("INSERT INTO users VALUES (2)")

    first = source.peek(max_changes=100)
    again = source.peek(max_changes=100)
    assert again.mutations == first.mutations
    assert again.up_to >= first.up_to  # the server's own (see above)

    source.advance(up_to=first.up_to)
    source.advance(up_to=first.up_to)  # again (a retried advance) changes nothing
    run("INSERT INTO users VALUES (3)")
    after = source.peek(max_changes=100)

    assert [m.partition_key for m in after.mutations] == [(3,)]
    assert after.mutations[0].audit.position > first.mutations[-1].audit.position
    assert source.status().confirmed_position == first.up_to


def test_a_window_without_captured_changes_still_moves_past_other_writes(
    run: Callable[..., None], capture: Capture
) -> None:
    run("CREATE TABLE users (id int PRIMARY KEY)", "CREATE TABLE other (id int PRIMARY KEY)")
    source = capture("users")
    confirmed = source.status().confirmed_position

    idle = source.peek(max_changes=10)
    assert idle.mutations == []
    assert confirmed is not None
    assert idle.up_to >= confirmed  # the server's own (see above)

    run("INSERT INTO other VALUES (1)")
    window = source.peek(max_changes=10)
    assert window.mutations == []
    assert window.up_to > confirmed
    source.advance(up_to=window.up_to)
    assert source.status().confirmed_position == window.up_to


def test_max_changes_never_splits_a_transaction(run: Callable[..., None], capture: Capture) -> None:
    run("CREATE TABLE users (id int PRIMARY KEY)")
    source = capture("users")
    run(*(f"INSERT INTO users VALUES ({i})" for i in range(10)))
    run("INSERT INTO users VALUES (10)")

    first = _next_changes(source, max_changes=1)
    assert [m.partition_key for m in first.mutations] == [(i,) for i in range(10)]

    source.advance(up_to=first.up_to)
    second = _next_changes(source, max_changes=1)
    assert [m.partition_key for m in second.mutations] == [(10,)]


def test_a_full_window_of_logical_messages_alone_is_moved_past(
    run: Callable[..., None], capture: Capture
) -> None:
    """Messages emitted outside a transaction (`pg_logical_emit_message(false, ...)`, a
    heartbeat) have no commit: a window the slot's limit filled with them alone ended where it
    began, so advancing it moved nothing and every later peek returned the same messages. The
    capture read on at once for ever (the window was full), and published nothing after them.
    """
    run("CREATE TABLE users (id int PRIMARY KEY)")
    source = capture("users")
    for beat in range(25):
        run(f"SELECT pg_logical_emit_message(false, 'heartbeat', '{beat}')")
    run("INSERT INTO users VALUES (1)")

    captured = []
    for _ in range(10):  # three full windows of messages, then the insert
        window = source.peek(max_changes=10)
        captured.extend(window.mutations)
        source.advance(up_to=window.up_to)
        if not window.has_more:
            break

    assert [m.partition_key for m in captured] == [(1,)]
    assert not window.has_more


def _next_changes(source: PostgresChangeSource, *, max_changes: int) -> CapturedWindow:
    """The next window holding captured changes, advancing past windows without any.

    The server's own transactions decode as empty ones (an autovacuum ANALYZE commit between
    the slot's creation and the test's inserts): a one-change window may hold only such.
    """
    window = source.peek(max_changes=max_changes)
    while not window.mutations and window.has_more:
        source.advance(up_to=window.up_to)
        window = source.peek(max_changes=max_changes)
    return window


def test_a_capture_until_idle_publishes_every_committed_change_of_a_backlog(
    run: Callable[..., None], capture: Capture, postgres_dsn: str, tmp_path: Path
) -> None:
    """A window of one-row transactions holds a third of its row limit in changes.

    The slot's limit counts wal2json's begin and commit rows: the capture stopped at the first
    window with fewer changes than `max_changes`, as if nothing more were committed (a stress
    run's final capture left a gigabyte of WAL unpublished), and `--follow` drained a backlog
    at a third of its pace.
    """
    run("CREATE TABLE users (id int PRIMARY KEY)", "CREATE TABLE noise (id int PRIMARY KEY)")
    source = capture("users")
    for i in range(40):
        run(f"INSERT INTO users VALUES ({i})")
        run(f"INSERT INTO noise VALUES ({i})")  # other tables' transactions count as rows too
    log = ParquetChangeLog(tmp_path / "log")
    with stores_at(postgres_dsn) as stores:
        runner = CaptureRunner(
            source,
            Publisher(log),
            SchemaRegistry(stores.schemas),
            settings=CaptureSettings(max_changes=12),
        )
        totals = runner.run(until_idle=True)

    assert totals.published == {"users": 40}
    assert sorted(m.partition_key for m in log.read("users")) == [(i,) for i in range(40)]
    assert source.peek(max_changes=12).mutations == []


def test_a_crash_between_publish_and_advance_publishes_nothing_twice(
    run: Callable[..., None], capture: Capture, tmp_path: Path
) -> None:
    run("CREATE TABLE users (id int PRIMARY KEY, name text)")
    source: ChangeSource = capture("users")
    log = ParquetChangeLog(tmp_path)
    publisher = Publisher(log, partitions=4)
    run("INSERT INTO users VALUES (1, 'ada'), (2, 'bob')")
    run("UPDATE users SET name = 'ann' WHERE id = 1", "DELETE FROM users WHERE id = 2")

    window = source.peek(max_changes=100)
    publisher.publish(window.mutations)
    # crash: the slot was not advanced, so the next run peeks the same window again
    replayed = source.peek(max_changes=100)
    receipt = publisher.publish(replayed.mutations)
    source.advance(up_to=replayed.up_to)
    run("INSERT INTO users VALUES (3, 'cy')")
    publisher.publish(source.peek(max_changes=100).mutations)

    assert receipt.skipped == len(window.mutations) == 4
    logged = sorted(log.read("users"), key=lambda m: m.audit.position)
    assert summary(logged) == [
        ("users", (1,), "upsert", {"name": "ada"}),
        ("users", (2,), "upsert", {"name": "bob"}),
        ("users", (1,), "upsert", {"name": "ann"}),
        ("users", (2,), "delete", {}),
        ("users", (3,), "upsert", {"name": "cy"}),
    ]
    assert len({m.audit.position for m in logged}) == 5


def test_status_shows_retained_wal(run: Callable[..., None], capture: Capture) -> None:
    run("CREATE TABLE users (id int PRIMARY KEY, name text)")
    source = capture("users")
    run(*(f"INSERT INTO users VALUES ({i}, 'x')" for i in range(100)))

    status = source.status()

    assert (status.name, status.tables) == (source.slot, ("users",))
    assert status.retained_bytes is not None
    assert status.retained_bytes > 0
    assert status.confirmed_position is not None
    assert status.head_position is not None
    assert status.head_position >= status.confirmed_position


def test_a_dropped_slot_is_reported_and_nothing_is_advanced(
    postgres_server_dsn: str, run: Callable[..., None], capture: Capture
) -> None:
    run("CREATE TABLE users (id int PRIMARY KEY)")
    source = capture("users")
    run("INSERT INTO users VALUES (1)")
    window = source.peek(max_changes=100)
    with psycopg.connect(postgres_server_dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_drop_replication_slot(%s)", (source.slot,))

    with pytest.raises(ReplicationSlotMissingError, match=source.slot):
        source.peek(max_changes=100)
    with pytest.raises(ReplicationSlotMissingError):
        source.advance(up_to=window.up_to)
    with pytest.raises(ReplicationSlotMissingError):
        source.status()
    assert slot_count(postgres_server_dsn, source.slot) == 0


def test_a_source_the_server_refuses_is_an_access_error_the_capture_does_not_retry(
    postgres_server_dsn: str, tmp_path: Path
) -> None:
    """A dropped database was StorageUnavailableError: the capture retried it as an outage for
    its whole reconnect timeout."""
    name = f"d_{secrets.token_hex(6)}"
    with psycopg.connect(postgres_server_dsn, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
        admin.execute(f"DROP DATABASE {name}")
    url = urlunsplit(urlsplit(postgres_server_dsn)._replace(path=f"/{name}"))
    source = PostgresChangeSource(url, slot="ordo_test_refused", tables=("users",))
    with pytest.raises(StorageAccessError, match="refuses the connection"):
        source.status()
    with stores_at(f"sqlite:///{tmp_path}/j.db") as stores:
        runner = CaptureRunner(
            source,
            Publisher(ParquetChangeLog(tmp_path / "log")),
            SchemaRegistry(stores.schemas),
            settings=CaptureSettings(reconnect_timeout=timedelta(minutes=10)),
        )
        started = time.monotonic()
        with pytest.raises(StorageAccessError, match=f"/{name} refuses the connection"):
            runner.run(until_idle=True)
        assert time.monotonic() - started < 10
