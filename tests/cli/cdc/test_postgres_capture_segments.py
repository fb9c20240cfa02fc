"""`ordo cdc capture` from PostgreSQL: each server publishes under a segment of its own.

The publisher skips the positions its change log already holds for a segment, so two sources
sharing one lose the second's changes: skipped as published, then confirmed at the source. The
segment was the slot's name (`ordo_cdc` by default), which two servers capturing into one log
shared; it is now `<slot>.<system identifier>`. A log already holding files of `<slot>` published
from the server goes on under `<slot>`, which its positions are under. A second server (a
ThrowawayPostgres of the test's own) has a system identifier of its own, as any other cluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from cdc_cli_support import capture_orders, orders_by_segment
from ordo.cdc import Publisher
from ordo.storage.parquet import ParquetChangeLog
from ordo.storage.postgres.change_source import PostgresChangeSource
from ordo.storage.postgres.throwaway import ThrowawayPostgres
from postgres_source_support import fresh_slot

pytestmark = pytest.mark.postgres


@pytest.fixture
def other_server() -> Iterator[str]:
    """A DSN of a second PostgreSQL cluster, started for the test."""
    with ThrowawayPostgres() as server:
        yield server.dsn


@pytest.fixture
def slot(postgres_dsn: str, other_server: str) -> Iterator[str]:
    """A slot name the test uses on both servers; dropped from both after it."""
    name = fresh_slot()
    yield name
    for dsn in (postgres_dsn, other_server):
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name = %s",
                (name,),
            )


def _sql(dsn: str, *statements: str) -> None:
    """Run `statements`, committed durably: logical decoding sees them at once."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = on")
        for statement in statements:
            conn.execute(statement)


def _value(dsn: str, query: str) -> str:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return str(row[0])


def _system_identifier(dsn: str) -> str:
    return _value(dsn, "SELECT system_identifier FROM pg_control_system()")


def _insert_ahead(dsn: str, behind: str, ids: range) -> None:
    """Insert `ids` into `dsn`'s orders at a WAL position past `behind`'s: higher positions.

    The positions of a capture are its server's commit LSNs; the collision loses the changes
    captured second only where they are at positions the first capture's already reach.
    """
    _sql(dsn, "SELECT pg_switch_wal()")  # the table's creation is WAL to switch past
    _sql(dsn, f"INSERT INTO orders SELECT i, i FROM generate_series({ids.start}, {ids.stop - 1}) i")
    ahead = f"SELECT pg_current_wal_lsn() - '{_value(behind, 'SELECT pg_current_wal_lsn()')}'"
    assert float(_value(dsn, ahead)) > 0


def _capture(dsn: str, slot: str, log: Path, journal: str) -> str:
    return capture_orders(log, journal, dsn, "--slot", slot)


def _segments(log: Path) -> dict[str, list[int]]:
    """Each segment of the orders log with the ids of its changes, in order."""
    return orders_by_segment(log, lambda mutation: int(str(mutation.partition_key[0])))


def test_two_servers_with_one_slot_name_publish_every_change(
    tmp_path: Path, journal: str, postgres_dsn: str, other_server: str, slot: str
) -> None:
    log = tmp_path / "log"
    for dsn in (postgres_dsn, other_server):  # the first capture creates the slot
        _sql(dsn, "CREATE TABLE orders (id BIGINT PRIMARY KEY, qty BIGINT)")
        assert _capture(dsn, slot, log, journal).startswith("published no changes")
    _sql(other_server, "INSERT INTO orders SELECT i, i FROM generate_series(10, 14) i")
    _insert_ahead(postgres_dsn, other_server, range(5))

    assert _capture(postgres_dsn, slot, log, journal) == (
        "published orders=5 (skipped 0 already in the log)"
    )
    assert _capture(other_server, slot, log, journal) == (
        "published orders=5 (skipped 0 already in the log)"
    )
    assert _segments(log) == {
        f"{slot}.{_system_identifier(postgres_dsn)}": [0, 1, 2, 3, 4],
        f"{slot}.{_system_identifier(other_server)}": [10, 11, 12, 13, 14],
    }


def test_a_log_of_an_earlier_ordo_keeps_the_slot_segment_of_its_server(
    tmp_path: Path, journal: str, postgres_dsn: str, other_server: str, slot: str
) -> None:
    """After a crash between publish and advance under an earlier ordo, nothing is published twice.

    The earlier ordo published a window under the slot's name and crashed before advancing the
    slot: the capture must recognise the log's positions as the server's own. The other server,
    capturing into that log for the first time, must not take them for its own.
    """
    log = tmp_path / "log"
    for dsn in (postgres_dsn, other_server):
        _sql(dsn, "CREATE TABLE orders (id BIGINT PRIMARY KEY, qty BIGINT)")
        with PostgresChangeSource(dsn, slot=slot, tables=["orders"]) as source:
            source.create()
    _sql(other_server, "INSERT INTO orders SELECT i, i FROM generate_series(10, 14) i")
    _insert_ahead(postgres_dsn, other_server, range(5))
    with PostgresChangeSource(postgres_dsn, slot=slot, tables=["orders"]) as source:
        rows = source.peek(max_changes=1000).rows
    earlier = rows.replaced("segment", [slot] * len(rows.column("segment")))
    assert Publisher(ParquetChangeLog(log)).publish_rows(earlier).published == {"orders": 5}

    assert _capture(postgres_dsn, slot, log, journal) == (
        "published no changes (skipped 5 already in the log)"
    )
    _sql(postgres_dsn, "INSERT INTO orders VALUES (5, 5)")
    assert _capture(postgres_dsn, slot, log, journal) == (
        "published orders=1 (skipped 0 already in the log)"
    )
    assert _capture(other_server, slot, log, journal) == (
        "published orders=5 (skipped 0 already in the log)"
    )
    assert _segments(log) == {
        slot: [0, 1, 2, 3, 4, 5],
        f"{slot}.{_system_identifier(other_server)}": [10, 11, 12, 13, 14],
    }
