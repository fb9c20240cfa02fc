"""A capture of a PostgreSQL server whose WAL is past the last position a change can have.

A change's position is its commit's end LSN times 1000 (less its place in the transaction), and
a snapshot's write time the slot's confirmed LSN times 1000: past 2**63 / 1000 (about 8 PiB of
WAL) neither fits the change log's int64. Every window failed with `MalformedMutationError:
audit position is too large`, which says nothing of why. The server here is the test's own,
its WAL moved on with pg_resetwal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import psycopg
import pytest

from ordo.errors import CaptureError
from ordo.storage.postgres.change_source import PostgresChangeSource
from ordo.storage.postgres.throwaway import ThrowawayPostgres

pytestmark = pytest.mark.postgres


@pytest.fixture
def source() -> Iterator[PostgresChangeSource]:
    """A source of table `items` (with a row) on a server whose WAL is past 0x20C49C/0."""
    with ThrowawayPostgres() as server:
        server.move_wal_to("000000010020C49C00000000")
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, v text)")
            opened = PostgresChangeSource(server.dsn, slot="ordo_far", tables=("items",))
            opened.create()
            conn.execute("SET synchronous_commit = on")
            conn.execute("INSERT INTO items VALUES (1, 'a')")
        try:
            yield opened
        finally:
            opened.close()


def test_a_server_past_the_last_position_stops_the_capture_saying_why(
    source: PostgresChangeSource,
) -> None:
    """A window's peek and a snapshot are each refused with a CaptureError that says why."""
    reads: list[Callable[[], object]] = [
        lambda: source.peek(max_changes=100),
        lambda: list(source.snapshot("items")),
    ]
    for read in reads:
        with pytest.raises(CaptureError, match=r"past 20C49B/A5E353F7, .* 8 PiB"):
            read()
