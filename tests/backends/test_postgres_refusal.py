"""A PostgreSQL server that is up but refuses the URL: StorageAccessError, not an outage.

A role that may no longer log in and a database that was dropped are refusals the server
states; a port nothing listens on is an outage. Each refusal starts once the journal is in use,
as a changed password or a dropped database would.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import timedelta
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from click.testing import CliRunner, Result
from psycopg import sql
from psycopg.abc import Query
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ordo import EventsByTagSettings, NewEvent, open_journal, open_stores
from ordo.cli.root import cli
from ordo.errors import (
    StorageAccessError,
    StorageUnavailableError,
    TagWriteBacklogError,
    TagWriteFailedError,
)
from ordo.processing import TrackingProcessor
from ordo.query import EventEnvelope
from ordo.reconnection import is_outage
from ordo.storage.open import stores_at
from ordo.storage.postgres import datastore
from ordo.storage.postgres.connection import connect
from ordo.storage.postgres.notification import PostgresTagListener
from ordo.tagging.notification import TagNotifier
from ordo.types import Tag
from processing_support import FAST, WRITE, source, wait_for

pytestmark = pytest.mark.postgres

BATCHED = EventsByTagSettings(flush_interval=timedelta(hours=1))

POOL_WAIT_S = 0.3
"""The pools' wait for a connection (POOL_TIMEOUT_S, 30 s): a refusal is told apart only once it
runs out. One that runs out while the server still accepts the URL is an outage, retried."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    """A journal's URL, and how to make the server refuse it from then on."""

    url: str
    refuse: Callable[[], object]
    readers: Callable[[], int]
    """How many of the URL's sessions read tag views last (a query's polls)."""
    restore: Callable[[], object] = lambda: None
    """Take the refusal back (a grant given again), where the test needs it."""


def _admin(server_dsn: str, statement: Query) -> int:
    """Run `statement` as the superuser; the first column of its row (0 without one)."""
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        cursor = conn.execute(statement)
        row = cursor.fetchone() if cursor.description else None
    return int(row[0]) if row else 0


_READERS = sql.SQL(
    "SELECT count(*) FROM pg_stat_activity WHERE {} = {} AND query LIKE '%FROM tag_views%'"
)


def _nologin(server_dsn: str) -> Iterator[Refusal]:
    """A role of its own, with the journal in its schema; refused: NOLOGIN, sessions ended."""
    yield from _own_role(server_dsn, sql.SQL("ALTER ROLE {role} NOLOGIN"), end_sessions=True)


def _revoked(server_dsn: str) -> Iterator[Refusal]:
    """A role of its own, with the journal in its schema; refused: its tables, to this role."""
    revoke = sql.SQL("REVOKE ALL ON ALL TABLES IN SCHEMA {role} FROM {role}")
    yield from _own_role(server_dsn, revoke, end_sessions=False)


def _own_role(
    server_dsn: str, refusal: sql.SQL, *, end_sessions: bool, restoral: sql.SQL | None = None
) -> Iterator[Refusal]:
    """A role of its own, with the journal in its schema; refused: `refusal` (of `{role}`),
    taken back by `restoral`."""
    name = f"r_{secrets.token_hex(6)}"
    role = sql.Identifier(name)
    _admin(server_dsn, sql.SQL("CREATE ROLE {} LOGIN").format(role))
    _admin(server_dsn, sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(role, role))
    parts = urlsplit(server_dsn)
    netloc = f"{name}@{parts.hostname}:{parts.port}"
    url = urlunsplit(parts._replace(netloc=netloc, query=f"options=-csearch_path%3D{name}"))
    ended = sql.SQL(
        "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity WHERE usename = {}"
    ).format(sql.Literal(name))

    def refuse() -> None:
        _admin(server_dsn, refusal.format(role=role))
        if end_sessions:
            _admin(server_dsn, ended)

    yield Refusal(
        url=url,
        refuse=refuse,
        readers=lambda: _admin(server_dsn, _READERS.format(sql.SQL("usename"), sql.Literal(name))),
        restore=lambda: restoral and _admin(server_dsn, restoral.format(role=role)),
    )
    _admin(server_dsn, ended)
    _admin(server_dsn, sql.SQL("DROP SCHEMA {} CASCADE").format(role))
    _admin(server_dsn, sql.SQL("DROP ROLE {}").format(role))


def _dropped_database(server_dsn: str) -> Iterator[Refusal]:
    """A database of its own; refused: dropped, its sessions ended (WITH (FORCE))."""
    name = f"d_{secrets.token_hex(6)}"
    database = sql.Identifier(name)
    _admin(server_dsn, sql.SQL("CREATE DATABASE {}").format(database))
    dropped = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(database)
    yield Refusal(
        url=urlunsplit(urlsplit(server_dsn)._replace(path=f"/{name}")),
        refuse=lambda: _admin(server_dsn, dropped),
        readers=lambda: _admin(server_dsn, _READERS.format(sql.SQL("datname"), sql.Literal(name))),
    )
    _admin(server_dsn, dropped)


@pytest.fixture(params=[_nologin, _dropped_database], ids=["nologin", "dropped-database"])
def refusal(request: pytest.FixtureRequest, postgres_server_dsn: str) -> Iterator[Refusal]:
    yield from request.param(postgres_server_dsn)


@pytest.fixture
def revoked(postgres_server_dsn: str) -> Iterator[Refusal]:
    yield from _revoked(postgres_server_dsn)


@pytest.fixture
def tag_views_revoked(postgres_server_dsn: str) -> Iterator[Refusal]:
    """The role's tag_views alone refused to it (appends still work), granted by restore()."""
    yield from _own_role(
        postgres_server_dsn,
        sql.SQL("REVOKE ALL ON {role}.tag_views FROM {role}"),
        end_sessions=False,
        restoral=sql.SQL("GRANT ALL ON {role}.tag_views TO {role}"),
    )


def _journal_with_one_event(url: str) -> None:
    with open_journal(url, settings=WRITE) as journal:
        journal.append("a", [NewEvent.of({"i": 1}, tags=["t"])])
        journal.flush()


def test_opening_a_refused_url_is_an_access_error(refusal: Refusal) -> None:
    _journal_with_one_event(refusal.url)
    refusal.refuse()
    with pytest.raises(StorageAccessError, match="refuses the connection"):
        open_stores(refusal.url)


def test_a_refusal_names_the_port_libpq_took_from_pgport(
    postgres_server_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The message named port 5432, not the one PGPORT gave libpq, where the server listens."""
    given = conninfo_to_dict(postgres_server_dsn)
    port = str(given.pop("port"))
    monkeypatch.setenv("PGPORT", port)
    name = f"d_{secrets.token_hex(6)}"  # no such database
    url = make_conninfo("", **{**given, "dbname": name})
    with pytest.raises(StorageAccessError) as refused:
        connect(url)
    assert str(refused.value).startswith(
        f"PostgreSQL at {given['host']}:{port}/{name} refuses the connection: "
    )


def test_a_port_nothing_listens_on_is_an_outage() -> None:
    with pytest.raises(StorageUnavailableError) as raised:
        open_stores("postgresql://nobody@127.0.0.1:1/none")
    assert not isinstance(raised.value, StorageAccessError)


def test_a_role_out_of_connection_slots_is_an_outage(postgres_server_dsn: str) -> None:
    """It answered the ping, so it counted as refusing: a processor stopped for good on it,
    though slots free up (after a restart every client reconnects at once)."""
    name = f"r_{secrets.token_hex(6)}"
    role = sql.Identifier(name)
    _admin(postgres_server_dsn, sql.SQL("CREATE ROLE {} LOGIN CONNECTION LIMIT 1").format(role))
    parts = urlsplit(postgres_server_dsn)
    url = urlunsplit(parts._replace(netloc=f"{name}@{parts.hostname}:{parts.port}"))
    try:
        with psycopg.connect(url), pytest.raises(StorageUnavailableError) as raised:
            connect(url)  # the role's one slot is taken
        assert not isinstance(raised.value, StorageAccessError)
        assert "too many connections for role" in str(raised.value)
    finally:
        _admin(postgres_server_dsn, sql.SQL("DROP ROLE {}").format(role))


def test_a_call_once_the_server_refuses_the_url_is_an_access_error(
    refusal: Refusal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool's wait ran out as in an outage: StorageUnavailableError, for ever."""
    monkeypatch.setattr(datastore, "POOL_TIMEOUT_S", POOL_WAIT_S)
    _journal_with_one_event(refusal.url)
    with stores_at(refusal.url) as stores:
        refusal.refuse()
        with pytest.raises(StorageAccessError, match="refuses the connection"):
            stores.schema_version()


def test_a_live_query_on_the_command_line_ends_once_the_server_refuses_the_url(
    refusal: Refusal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ordo query --live` retried it as an outage, for ever.

    A read in flight when the sessions end fails as an outage (a WARNING), the next as refused.
    """
    monkeypatch.setattr(datastore, "POOL_TIMEOUT_S", POOL_WAIT_S)
    monkeypatch.setenv("ORDO_FIRST_TIME_BUCKET", WRITE.first_time_bucket)
    monkeypatch.setenv("ORDO_EVENTUAL_CONSISTENCY_DELAY_MS", "100")
    _journal_with_one_event(refusal.url)
    results: list[Result] = []
    command = threading.Thread(
        target=lambda: results.append(
            CliRunner().invoke(cli, ["query", "t", "--journal", refusal.url, "--live"])
        ),
        daemon=True,  # the old code never ends
    )
    command.start()
    wait_for(lambda: refusal.readers() > 0)  # the command reads the journal
    refusal.refuse()
    command.join(timeout=30)
    assert results, "the live query still runs"
    assert results[0].exit_code == 1, results[0].output
    [line] = results[0].stderr.splitlines()
    assert line.startswith("Error: StorageAccessError: PostgreSQL at ")
    assert "refuses the connection" in line


def test_a_processor_stops_once_the_server_refuses_the_url(
    refusal: Refusal, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Its threads retried a refusal as an outage, for ever, with a WARNING each time.

    The pool's wait ran out (30 s, POOL_WAIT_S here) and a worker thread did not ask why: a refusal
    came out as StorageUnavailableError. The processor now stops and keeps the refusal in
    `failure`, as it does a handler's failure.
    """
    monkeypatch.setattr(datastore, "POOL_TIMEOUT_S", POOL_WAIT_S)
    failure = _failure_of_a_processor_refused(refusal)
    assert isinstance(failure, StorageAccessError), caplog.text
    assert "refuses the connection" in str(failure)


def test_a_processor_stops_once_its_tables_are_refused_to_its_role(
    revoked: Refusal, caplog: pytest.LogCaptureFixture
) -> None:
    """A table the role may no longer use was a plain StorageError, which the processor's
    threads retried for ever, a WARNING per claim interval: it is StorageAccessError."""
    failure = _failure_of_a_processor_refused(revoked)
    assert isinstance(failure, StorageAccessError), caplog.text
    assert str(failure).startswith("PostgreSQL refuses access: permission denied for table ")


def _failure_of_a_processor_refused(refusal: Refusal) -> BaseException | None:
    """The `failure` a two-thread processor stops with once `refusal` refuses it mid-run."""
    _journal_with_one_event(refusal.url)
    handled: list[EventEnvelope] = []
    settings = replace(FAST, thread_count=2, initial_segment_count=2)
    with stores_at(refusal.url) as stores:
        processor = TrackingProcessor(
            "p", source(stores), stores.tokens, lambda e, _: handled.append(e), settings=settings
        )
        with processor:
            wait_for(lambda: len(handled) == 1)
            refusal.refuse()
            wait_for(lambda: not processor.is_running)
    return processor.failure


def test_the_tag_listener_gives_up_once_the_server_refuses_the_url(
    refusal: Refusal, caplog: pytest.LogCaptureFixture
) -> None:
    """It attempted to LISTEN again for ever, as after a restart. (Queries poll meanwhile, and
    meet the refusal themselves.)"""
    _journal_with_one_event(refusal.url)
    listener = PostgresTagListener(refusal.url, TagNotifier())
    try:
        refusal.refuse()
        wait_for(lambda: "ordo-tag-listener" not in {t.name for t in threading.enumerate()})
    finally:
        listener.close()
    [gave_up] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert "tag listener gave up" in gave_up.getMessage()
    assert "refuses the connection" in gave_up.getMessage()


def test_a_journal_refused_its_tag_views_refuses_appends_until_opened_again(
    tag_views_revoked: Refusal, caplog: pytest.LogCaptureFixture
) -> None:
    """The tag writers retried the refusal every flush interval for ever, a WARNING each time,
    while appends went on and their buffer grew."""
    url = tag_views_revoked.url
    journal = open_journal(url, settings=BATCHED)
    journal.append("a", [NewEvent.of(1, tags=["t"])], expected_sequence_nr=0)
    tag_views_revoked.refuse()
    with pytest.raises(TagWriteFailedError) as failed:
        journal.flush()
    assert isinstance(failed.value.cause, StorageAccessError)
    with pytest.raises(TagWriteFailedError):
        journal.append("a", [NewEvent.of(2, tags=["t"])])
    with pytest.raises(TagWriteFailedError):
        journal.close()
    assert [r.levelno for r in caplog.records if r.levelno >= logging.WARNING] == [logging.ERROR]

    tag_views_revoked.restore()
    with open_journal(url, settings=BATCHED) as reopened:
        assert reopened.recover("a") == 1
    with stores_at(url) as stores:
        assert stores.tag_views.heads(Tag("t")) == {"a": 1}


def test_tag_views_locked_past_the_lock_timeout_refuse_appends_over_max_buffer_size(
    postgres_dsn: str,
) -> None:
    """An outage of the tag views alone: appends went on and the buffer grew without bound."""
    options = conninfo_to_dict(postgres_dsn)["options"]
    url = make_conninfo(postgres_dsn, options=f"{options} -clock_timeout=200")
    settings = replace(BATCHED, max_message_batch_size=2, max_buffer_size=3)
    with open_journal(url, settings=settings) as journal:
        journal.append("a", [NewEvent.of(0, tags=["t"])], expected_sequence_nr=0)
        with psycopg.connect(postgres_dsn) as locker:
            locker.execute("LOCK TABLE tag_views IN ACCESS EXCLUSIVE MODE")
            journal.append("a", [NewEvent.of(n, tags=["t"]) for n in range(3)])  # appended
            with pytest.raises(TagWriteBacklogError) as refused:
                journal.append("a", [NewEvent.of(4, tags=["t"])])
            error = refused.value
            assert (error.tag, error.buffered, error.limit) == ("t", 4, 3)
            assert is_outage(error)
            assert is_outage(error.cause)
            assert "lock timeout" in str(error)
            assert journal.highest_sequence_nr("a") == 4
            locker.rollback()
        journal.append("a", [NewEvent.of(4, tags=["t"])])  # writes the backlog first
    with stores_at(url) as stores:
        assert stores.tag_views.heads(Tag("t")) == {"a": 5}
