"""A role or database whose session defaults differ from PostgreSQL's: ordo's stores still work,
or say why they cannot.

DBAs set defaults with `ALTER ROLE ... SET` or `ALTER DATABASE ... SET`; the stores' sessions
run ordo's statements as written for them (read committed), whatever those defaults say. A
read-only default is the DBA's to lift: writes fail with StorageAccessError naming it.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from operations_support import wait_for_a_lock_wait
from ordo import NewEvent, open_journal
from ordo.errors import StorageAccessError, StorageUnavailableError
from ordo.journal import Journal
from ordo.reconnection import is_outage
from ordo.storage.postgres.throwaway import ThrowawayPostgres
from postgres_source_support import with_server_option

pytestmark = pytest.mark.postgres


@pytest.fixture
def serializable_role_url(role_url: str, postgres_server_dsn: str) -> str:
    """The URL of a role of its own whose transactions default to serializable, in its schema."""
    _set_role_default(
        postgres_server_dsn, role_url, "default_transaction_isolation", "serializable"
    )
    return role_url


@pytest.fixture
def role_url(postgres_server_dsn: str) -> Iterator[str]:
    """The URL of a role of its own, whose search_path is a schema of its own."""
    name = f"r_{secrets.token_hex(6)}"
    role = sql.Identifier(name)
    with psycopg.connect(postgres_server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(role))
        admin.execute(sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(role, role))
        admin.execute(sql.SQL("ALTER ROLE {} SET search_path = {}").format(role, role))
    parts = urlsplit(postgres_server_dsn)
    yield urlunsplit(parts._replace(netloc=f"{name}@{parts.hostname}:{parts.port}"))
    with psycopg.connect(postgres_server_dsn, autocommit=True) as admin:
        admin.execute(
            sql.SQL(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE usename = {}"
            ).format(sql.Literal(name))
        )
        admin.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(role))
        admin.execute(sql.SQL("DROP ROLE {}").format(role))


def test_an_append_racing_a_registration_succeeds_where_transactions_default_to_serializable(
    serializable_role_url: str,
) -> None:
    """An append that waited for another session registering its persistence id (another
    writer's append, or a deletion) was rolled back as a serialization failure: a
    TransactionConflictError for an append whose expected sequence nr was right, which a
    read committed session (PostgreSQL's default) does not raise. Appends to different
    persistence ids failed so too now and then, in rw-dependency conflicts."""
    url = serializable_role_url
    with open_journal(url) as journal, psycopg.connect(url) as other:
        other.execute("INSERT INTO all_persistence_ids (persistence_id) VALUES ('a')")
        outcome: list[BaseException | None] = []
        appending = threading.Thread(target=lambda: outcome.append(_append(journal)))
        appending.start()
        # the append waits for the registration
        wait_for_a_lock_wait(serializable_role_url, "all_persistence_ids", unless_ended=appending)
        other.commit()
        appending.join()
        assert outcome == [None]
        assert journal.highest_sequence_nr("a") == 1


def test_a_journal_whose_role_was_made_read_only_refuses_appends_as_an_access_error(
    role_url: str, postgres_server_dsn: str
) -> None:
    """A primary that runs the role's transactions read-only (`ALTER ROLE ... SET
    default_transaction_read_only = on`) refuses writes with SQLSTATE 25006, as a hot standby
    does during a failover. It was taken for an outage ("PostgreSQL is unavailable"), which a
    tracking processor or the tag writer retried for ever; no retry mends it."""
    with open_journal(role_url):  # the journal's tables, created before the setting
        pass
    _set_role_default(postgres_server_dsn, role_url, "default_transaction_read_only", "on")
    with open_journal(role_url) as journal:
        with pytest.raises(StorageAccessError, match="default_transaction_read_only") as refused:
            journal.append("a", [NewEvent.of(1)], expected_sequence_nr=0)
        assert not is_outage(refused.value)
        assert "ALTER ROLE" in str(refused.value)


def test_creating_a_journal_where_the_role_is_read_only_is_an_access_error(
    role_url: str, postgres_server_dsn: str
) -> None:
    """`ordo init` on such a role said "PostgreSQL is unavailable: cannot execute CREATE TABLE
    in a read-only transaction", as of a server that is down."""
    _set_role_default(postgres_server_dsn, role_url, "default_transaction_read_only", "on")
    with pytest.raises(StorageAccessError, match="default_transaction_read_only"):
        open_journal(role_url)


def test_a_read_only_default_of_the_servers_configuration_stays_an_outage() -> None:
    """Hosted services turn a server's default read-only for a while (a disk nearly full) and
    off again: a retry rides that out, so it is no refusal. The server's own server: its
    default is on for every session; the journal's tables are made by a session whose URL
    turns it off."""
    with ThrowawayPostgres(settings=("default_transaction_read_only=on",)) as server:
        with open_journal(with_server_option(server.dsn, "-cdefault_transaction_read_only=off")):
            pass
        with open_journal(server.dsn) as journal:
            with pytest.raises(StorageUnavailableError, match="read-only transaction") as lost:
                journal.append("a", [NewEvent.of(1)], expected_sequence_nr=0)
            assert is_outage(lost.value)


def test_a_read_only_default_the_urls_options_ask_for_is_an_access_error(
    role_url: str,
) -> None:
    """The URL's own options (`-cdefault_transaction_read_only=on`) are as deliberate as a
    role's default; the message says where the setting comes from."""
    with open_journal(role_url):
        pass
    read_only = with_server_option(role_url, "-cdefault_transaction_read_only=on")
    with (
        open_journal(read_only) as journal,
        pytest.raises(StorageAccessError, match="by the URL's options"),
    ):
        journal.append("a", [NewEvent.of(1)], expected_sequence_nr=0)


def _set_role_default(server_dsn: str, role_url: str, setting: str, value: str) -> None:
    """`ALTER ROLE ... SET setting = value` for the role `role_url` logs in as."""
    role = sql.Identifier(str(urlsplit(role_url).username))
    statement = sql.SQL("ALTER ROLE {} SET {} = {}").format(
        role, sql.Identifier(setting), sql.Literal(value)
    )
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(statement)


def _append(journal: Journal) -> BaseException | None:
    """Append event 1 to persistence id `a`, which holds none yet; the error, if any."""
    try:
        journal.append("a", [NewEvent.of(1)], expected_sequence_nr=0)
    except BaseException as exc:  # reported to the test's thread
        return exc
    return None
