"""A PostgreSQL change source's replication slot: created only for tables it can capture,
reused but never taken from another plugin, and refused when every slot is taken, the role
cannot replicate or the server has no logical decoding; a slot the server invalidated.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from ordo.errors import CaptureError
from ordo.storage.postgres.change_source import PostgresChangeSource
from ordo.storage.postgres.throwaway import ThrowawayPostgres
from ordo.tools.status import retention
from postgres_source_support import Capture, fresh_slot, slot_count

pytestmark = pytest.mark.postgres


def test_a_refused_table_creates_no_slot(postgres_dsn: str, capture: Capture) -> None:
    """A slot left by a refused capture would make the server keep WAL for nobody."""
    source = capture("nowhere", create=False)
    with pytest.raises(CaptureError, match="'nowhere'"):
        source.create()
    assert slot_count(postgres_dsn, source.slot) == 0


def test_create_reuses_its_slot_and_refuses_a_foreign_one(
    postgres_dsn: str, run: Callable[..., None], capture: Capture
) -> None:
    run("CREATE TABLE users (id int PRIMARY KEY)")
    source = capture("users")
    source.create()  # the same slot again: reused
    foreign = capture("users", create=False)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_create_logical_replication_slot(%s, 'test_decoding')", (foreign.slot,)
        )
    with pytest.raises(CaptureError, match="not a wal2json slot"):
        foreign.create()


def test_a_capture_is_refused_when_every_slot_is_taken(
    postgres_dsn: str, run: Callable[..., None], capture: Capture
) -> None:
    run("CREATE TABLE users (id int PRIMARY KEY)")
    source = capture("users", create=False)
    fillers: list[str] = []
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        try:
            while True:  # physical slots count against max_replication_slots too
                row = conn.execute(
                    "SELECT current_setting('max_replication_slots')::int "
                    "- (SELECT count(*) FROM pg_replication_slots)"
                ).fetchone()
                if row is None or row[0] <= 0:
                    break
                fillers.append(f"ordo_filler_{secrets.token_hex(6)}")
                conn.execute("SELECT pg_create_physical_replication_slot(%s)", (fillers[-1],))
            with pytest.raises(CaptureError, match="every replication slot is taken"):
                source.check()
            with pytest.raises(CaptureError, match="every replication slot is taken"):
                source.create()
        finally:
            for name in fillers:
                conn.execute("SELECT pg_drop_replication_slot(%s)", (name,))
    assert slot_count(postgres_dsn, source.slot) == 0


def test_a_capture_by_a_role_that_cannot_replicate_is_refused(
    postgres_dsn: str, run: Callable[..., None]
) -> None:
    role = f"ordo_reader_{secrets.token_hex(6)}"
    run("CREATE TABLE users (id int PRIMARY KEY)", f"CREATE ROLE {role} LOGIN NOREPLICATION")
    source = PostgresChangeSource(
        make_conninfo(postgres_dsn, user=role),
        slot=fresh_slot(),
        tables=("users",),
    )
    try:  # the test's schema, the role's search_path, is hidden from it without USAGE
        with pytest.raises(CaptureError, match="that the role has USAGE on"):
            source.create()
        run(
            "DO $$ BEGIN EXECUTE format('GRANT USAGE ON SCHEMA %%I TO %%I', current_schema(), "
            f"'{role}'); END $$"
        )
        with pytest.raises(CaptureError, match="neither the REPLICATION nor the SUPERUSER"):
            source.create()
    finally:
        source.close()
        run(f"DROP OWNED BY {role}", f"DROP ROLE {role}")
    assert slot_count(postgres_dsn, source.slot) == 0


def test_a_capture_on_a_server_without_logical_decoding_is_refused() -> None:
    with ThrowawayPostgres(settings=("wal_level=replica",)) as server:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE users (id int PRIMARY KEY)")
        source = PostgresChangeSource(server.dsn, slot="ordo_test", tables=("users",))
        try:
            with pytest.raises(CaptureError, match="wal_level is 'replica'"):
                source.check()
        finally:
            source.close()


def test_a_slot_the_server_invalidated_stops_the_capture_at_once_and_its_status_says_so() -> None:
    """A slot that fell further behind than `max_slot_wal_keep_size` loses its WAL: the server
    invalidates it, and no capture of it can go on (the changes in the lost WAL are gone).
    Peeking it failed as an outage (StorageUnavailableError), which the capture retried for the
    whole reconnect timeout before it said "PostgreSQL is unavailable", and its status showed
    "0 changes waiting", as if it were a drained SQLite change table.
    """
    with ThrowawayPostgres(settings=("max_slot_wal_keep_size=1MB",)) as server:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE users (id int PRIMARY KEY)")
        source = PostgresChangeSource(server.dsn, slot="ordo_test", tables=("users",))
        try:
            source.create()
            with psycopg.connect(server.dsn, autocommit=True) as conn:
                for i in range(3):  # each in a WAL segment of its own, past what is kept
                    conn.execute("INSERT INTO users VALUES (%s)", (i,))
                    conn.execute("SELECT pg_switch_wal()")
                conn.execute("CHECKPOINT")  # removes the segments: the slot is invalidated

            with pytest.raises(CaptureError, match="invalidated") as refused:
                source.peek(max_changes=10)
            assert "--snapshot" in str(refused.value)
            status = source.status()
            assert "invalidated" in retention(status)
            assert status.invalidated
        finally:
            source.drop()
            source.close()
