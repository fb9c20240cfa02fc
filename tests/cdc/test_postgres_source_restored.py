"""A capture of a PostgreSQL server whose WAL went back, its system identifier unchanged.

A restore of a file copy, a point-in-time recovery, or a failover to a standby that had not
received everything the old primary had published: the server's new commits take positions
the change log holds or has passed, under the same segment (`<slot>.<system identifier>`). The
publisher skipped them as published, and the capture advanced the slot past them: lost without
a word. The server here is the test's own, restored from a copy of its data directory.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from change_log_support import log_contents
from ordo.cdc import Publisher, SchemaRegistry
from ordo.cdc.capture import Capture, CaptureTotals
from ordo.errors import SourceRewoundError
from ordo.storage.change_sources import change_source_at
from ordo.storage.open import stores_at
from ordo.storage.parquet import ParquetChangeLog
from ordo.storage.postgres.throwaway import ThrowawayPostgres

pytestmark = pytest.mark.postgres


def _sql(dsn: str, *statements: str) -> None:
    """Run `statements`, each committed durably: logical decoding sees them at once."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = on")
        for statement in statements:
            conn.execute(statement)


def _capture(dsn: str, log: ParquetChangeLog, journal: Path) -> CaptureTotals:
    """Capture table `items` into `log` until the slot holds nothing more."""
    with (
        stores_at(f"sqlite:///{journal}") as stores,
        change_source_at(dsn, ["items"], slot="ordo_restored", log=log) as source,
    ):
        return Capture(source, Publisher(log), SchemaRegistry(stores.schemas)).run(until_idle=True)


def test_a_capture_of_a_server_restored_from_a_copy_is_refused(tmp_path: Path) -> None:
    """Keys 1..3 were inserted and updated 4 times after the copy was taken, and captured; the
    server, restored from the copy, inserts them again with other values, at positions below
    the log's. The capture is refused: nothing published, the slot not advanced."""
    log, journal = ParquetChangeLog(tmp_path / "log"), tmp_path / "journal.db"
    with ThrowawayPostgres() as server:
        _sql(server.dsn, "CREATE TABLE items (id bigint PRIMARY KEY, v text)")
        with change_source_at(server.dsn, ["items"], slot="ordo_restored", log=log):
            pass  # the slot, created before the copy
        copy = server.backup()
        _sql(server.dsn, "INSERT INTO items VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        _sql(server.dsn, *(f"UPDATE items SET v = v || '{n}'" for n in range(4)))
        assert _capture(server.dsn, log, journal).published == {"items": 15}
        server.restore(copy)
        _sql(server.dsn, "INSERT INTO items VALUES (1, 'x'), (2, 'y'), (3, 'z')")
        before = log_contents(log.root)
        with change_source_at(server.dsn, ["items"], slot="ordo_restored", log=log) as source:
            confirmed = source.status().confirmed_position
        with pytest.raises(SourceRewoundError, match="the source's log went back") as info:
            _capture(server.dsn, log, journal)
        assert (info.value.table, info.value.segment) == ("items", source.name)
        assert log_contents(log.root) == before
        with change_source_at(server.dsn, ["items"], slot="ordo_restored", log=log) as source:
            assert source.status().confirmed_position == confirmed
            assert [m.cells["v"].value for m in source.peek(max_changes=100).mutations] == [
                "x",
                "y",
                "z",
            ]
