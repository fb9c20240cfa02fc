from __future__ import annotations

import secrets
import threading
import uuid

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ordo import (
    NewEvent,
    SchemaVersionError,
    StorageAccessError,
    StorageError,
    StorageUnavailableError,
    TransactionConflictError,
    init_storage,
    open_journal,
    open_stores,
)
from ordo.errors import StatementCanceledError, StoresClosedError
from ordo.reconnection import is_outage
from ordo.storage.migration import load_migrations
from ordo.storage.open import OpenMode, existing_stores_at, stores_at
from ordo.storage.postgres.datastore import PostgresDatastore
from processing_support import wait_for
from sqlite_support import JOURNAL_ID_VERSION  # the same number on both backends

LATEST = load_migrations("ordo.storage.postgres")[-1].version

pytestmark = pytest.mark.postgres


def test_an_unreachable_server_is_unavailable() -> None:
    with pytest.raises(StorageUnavailableError, match="cannot connect to PostgreSQL"):
        open_stores("postgresql://nobody@127.0.0.1:1/none")


def test_concurrent_inits_create_the_schema_once(postgres_dsn: str) -> None:
    receipts = []

    def init() -> None:
        receipts.append(init_storage(postgres_dsn))

    threads = [threading.Thread(target=init) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.previous_version for r in receipts) == [0, LATEST, LATEST, LATEST]
    assert {r.version for r in receipts} == {LATEST}


def test_a_deadlock_is_a_transaction_conflict_not_an_outage(postgres_dsn: str) -> None:
    """Two transactions locking two rows in opposite orders: PostgreSQL rolls one back. That
    error said "PostgreSQL is unavailable", as if the server were down; it is a
    TransactionConflictError now (still a StorageUnavailableError, so retried alike)."""
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE pair (id integer PRIMARY KEY)")
        conn.execute("INSERT INTO pair VALUES (1), (2)")
    both_hold_one = threading.Barrier(2, timeout=30)
    failures: list[StorageError] = []
    datastore = PostgresDatastore(postgres_dsn)

    def lock(first: int, second: int) -> None:
        try:
            with datastore.write_transaction() as conn:
                conn.execute("SELECT id FROM pair WHERE id = %s FOR UPDATE", (first,))
                both_hold_one.wait()
                conn.execute("SELECT id FROM pair WHERE id = %s FOR UPDATE", (second,))
        except StorageError as exc:
            failures.append(exc)

    threads = [threading.Thread(target=lock, args=pair) for pair in ((1, 2), (2, 1))]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        datastore.close()
    assert len(failures) == 1
    assert isinstance(failures[0], TransactionConflictError)
    assert "rolled the transaction back in a conflict" in str(failures[0])
    assert "deadlock detected" in str(failures[0])


def test_a_journal_of_a_newer_schema_is_refused(postgres_dsn: str) -> None:
    init_storage(postgres_dsn)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE ordo_metadata SET value = %s WHERE key = 'schema_version'", (str(LATEST + 1),)
        )
    with pytest.raises(SchemaVersionError, match="newer"):
        open_stores(postgres_dsn)


def test_a_journal_opened_for_reading_is_checked_not_upgraded(postgres_dsn: str) -> None:
    init_storage(postgres_dsn)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            f"UPDATE ordo_metadata SET value = '{LATEST - 1}' WHERE key = 'schema_version'"
        )
    with pytest.raises(SchemaVersionError, match="older"), existing_stores_at(postgres_dsn):
        pass
    with psycopg.connect(postgres_dsn) as conn:
        version = conn.execute("SELECT value FROM ordo_metadata WHERE key = 'schema_version'")
        assert version.fetchone() == (str(LATEST - 1),)


def test_a_journal_keeps_the_random_id_it_got_when_created_or_upgraded(postgres_dsn: str) -> None:
    """What tells Spark's source that a checkpoint is of another journal: offsets named none."""

    def journal_id(dsn: str, mode: OpenMode = "read") -> str | None:
        with stores_at(dsn, mode=mode) as stores:
            found = stores.journal.journal_id()
            assert stores.journal.summary().journal_id == found
        return found

    init_storage(postgres_dsn)
    created = journal_id(postgres_dsn)
    assert created is not None
    assert uuid.UUID(created).version == 4
    init_storage(postgres_dsn)
    assert journal_id(postgres_dsn, "migrate") == created
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:  # as an ordo before the id
        conn.execute("DELETE FROM ordo_metadata WHERE key = 'journal_id'")
        conn.execute(
            f"UPDATE ordo_metadata SET value = '{JOURNAL_ID_VERSION - 1}' "
            "WHERE key = 'schema_version'"
        )
    assert journal_id(postgres_dsn) is None  # read without the check: no id, nothing written
    upgraded = journal_id(postgres_dsn, "migrate")  # a writer's open upgrades the schema
    assert upgraded is not None
    assert upgraded != created


def test_identifiers_sort_bytewise_whatever_the_server_locale(postgres_dsn: str) -> None:
    init_storage(postgres_dsn)
    with psycopg.connect(postgres_dsn) as conn:
        collations = conn.execute(
            "SELECT DISTINCT collation_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND column_name IN ('persistence_id', 'tag')"
        ).fetchall()
    assert collations == [("C",)]


def test_opening_a_current_journal_does_not_wait_for_a_migration(postgres_dsn: str) -> None:
    init_storage(postgres_dsn)
    with psycopg.connect(postgres_dsn, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(hashtext('ordo.migrate'))")  # a migration runs
        opened: list[object] = []
        opening = threading.Thread(target=lambda: opened.append(open_stores(postgres_dsn)))
        opening.start()
        opening.join(10)
        waited = not opened
        other.execute("SELECT pg_advisory_unlock(hashtext('ordo.migrate'))")
        opening.join()
    for stores in opened:
        stores.close()  # type: ignore[attr-defined]
    assert not waited, "opening a current journal waited for the migration lock"


def _schema_of(dsn: str) -> str:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT current_schema()").fetchone()
    assert row is not None
    return str(row[0])


def _opening_refused(dsn: str, url: str, *, made: str, dropped: str) -> StorageUnavailableError:
    """What opening the existing stores at `url` raises while what the statement `made` creates
    in `dsn`'s database exists (`dropped` drops it after)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(made)
    try:
        with pytest.raises(StorageUnavailableError) as raised, existing_stores_at(url):
            pass
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(dropped)
    return raised.value


def test_a_schema_without_a_journal_is_named_with_the_schemas_that_hold_one(
    postgres_dsn: str,
) -> None:
    """The error named no schema: a URL selecting the wrong one looked like no journal at all."""
    init_storage(postgres_dsn)
    journal_schema = _schema_of(postgres_dsn)
    empty = f"{journal_schema}_empty"
    refused = _opening_refused(
        postgres_dsn,
        postgres_dsn.replace(journal_schema, empty),
        made=f"CREATE SCHEMA {empty}",
        dropped=f"DROP SCHEMA {empty}",
    )
    assert not isinstance(refused, StorageAccessError)  # `ordo init` or a writer makes one
    message = str(refused)
    assert message.startswith("no ordo journal in PostgreSQL at 127.0.0.1:")
    assert f"in schema '{empty}': create it with `ordo init`; this database holds one in" in message
    assert f"'{journal_schema}'" in message
    assert "?options=-csearch_path%3D" in message


def test_a_search_path_without_an_existing_schema_is_named(postgres_dsn: str) -> None:
    """init failed mid-migration with "no schema has been selected to create in".

    No outage: StorageAccessError (ordo creates no schema), where it was StorageUnavailableError,
    which code that rides out outages retries."""
    schema = _schema_of(postgres_dsn)
    misspelt = postgres_dsn.replace(schema, f"{schema}_missing")
    expected = f"has no schema of the search_path '{schema}_missing': create the schema"
    with pytest.raises(StorageAccessError, match=expected):
        init_storage(misspelt)
    with pytest.raises(StorageAccessError, match=expected), existing_stores_at(misspelt):
        pass


def test_a_journal_is_created_in_the_first_schema_of_the_search_path(postgres_dsn: str) -> None:
    """A search_path of `tenant, public` with a journal in public only: `ordo init` found
    public's metadata table (to_regclass looks along the whole search_path), created nothing in
    the tenant's schema, and every write of the tenant went into public's journal."""
    init_storage(postgres_dsn)
    shared = _schema_of(postgres_dsn)
    tenant = f"{shared}_tenant"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {tenant}")
    try:
        tenant_url = postgres_dsn.replace(shared, f"{tenant},{shared}")
        receipt = init_storage(tenant_url)
        assert (receipt.previous_version, receipt.version) == (0, LATEST)
        with open_journal(tenant_url) as journal:
            journal.append("p", [NewEvent.of(1, tags=["t"])])
        with stores_at(postgres_dsn, mode="read") as stores:
            assert list(stores.journal.persistence_ids()) == []
        with stores_at(tenant_url, mode="read") as stores:
            assert "ordo_metadata" in stores.table_names()  # those of the tenant's schema
            assert list(stores.journal.persistence_ids()) == ["p"]
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {tenant} CASCADE")


def test_a_schema_the_user_may_not_use_is_named_with_the_grant_it_needs(
    postgres_dsn: str,
) -> None:
    """PostgreSQL skips such a schema: the error said there was no journal, or no schema.

    No outage: StorageAccessError, which no retry mends until someone grants USAGE."""
    init_storage(postgres_dsn)
    schema = _schema_of(postgres_dsn)
    role = f"ordo_reader_{secrets.token_hex(4)}"
    refused = _opening_refused(
        postgres_dsn,
        make_conninfo(postgres_dsn, user=role),
        made=f"CREATE ROLE {role} LOGIN",
        dropped=f"DROP ROLE {role}",
    )
    assert isinstance(refused, StorageAccessError)
    assert f"user '{role}' may not use schema '{schema}' of the search_path" in str(refused)
    assert f"(GRANT USAGE ON SCHEMA {schema} TO {role})" in str(refused)


def test_a_call_running_when_the_stores_close_ends_with_stores_closed_error(
    postgres_dsn: str,
) -> None:
    """What SQLite's datastore now does too (test_sqlite_datastore has its twin): the pool
    closes the call's connection when the call gives it back, so its transaction commits, and
    its next use of the stores (initialize reads the segments back) is StoresClosedError. The
    call is held in its first statement by a lock on the tokens table.
    """
    stores = open_stores(postgres_dsn)
    raised: list[BaseException] = []

    def initialize() -> None:
        try:
            stores.tokens.initialize("running", segment_count=2)
        except BaseException as exc:
            raised.append(exc)

    with psycopg.connect(postgres_dsn) as holder:
        holder.execute("LOCK TABLE tokens IN ACCESS EXCLUSIVE MODE")
        caller = threading.Thread(target=initialize)
        caller.start()
        wait_for(lambda: _waits_for_tokens(postgres_dsn))
        stores.close()
    caller.join()

    assert [type(exc) for exc in raised] == [StoresClosedError]
    with existing_stores_at(postgres_dsn) as reopened:
        assert len(reopened.tokens.entries("running")) == 2  # its transaction committed


def _waits_for_tokens(dsn: str) -> bool:
    """Whether a session waits for a lock on the tokens table."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'tokens'::regclass"
        ).fetchone()
    return row is not None and row[0] > 0


def test_a_transaction_the_server_ended_for_idling_is_an_outage(postgres_dsn: str) -> None:
    """A tracking processor's batch idle past its limit (`TokenStore.batch`'s idle_limit_ms) is
    ended by the server: the processor gives the claim up and claims again, as after any lost
    session. Its error was a plain StorageError, which the processor would stop on."""
    datastore = PostgresDatastore(postgres_dsn)
    try:
        with pytest.raises(StorageError) as ended:
            _idle_until_the_server_ends_it(datastore, postgres_dsn)
    finally:
        datastore.close()
    assert isinstance(ended.value, StorageUnavailableError)
    assert not isinstance(ended.value, StorageAccessError)
    assert "idle-in-transaction timeout" in str(ended.value)


def _idle_until_the_server_ends_it(datastore: PostgresDatastore, dsn: str) -> None:
    """A write transaction that idles until its session is gone, then runs a statement."""
    with datastore.write_transaction() as conn:
        conn.execute("SELECT set_config('idle_in_transaction_session_timeout', '50', true)")
        [(pid,)] = conn.execute("SELECT pg_backend_pid()").fetchall()
        with psycopg.connect(dsn, autocommit=True) as watcher:
            wait_for(
                lambda: (
                    not watcher.execute(
                        "SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)
                    ).fetchall()
                )
            )
        conn.execute("SELECT 1")


@pytest.mark.parametrize(
    ("setting", "error", "message"),
    [
        (
            "lock_timeout",
            TransactionConflictError,
            "PostgreSQL gave up waiting for a lock a concurrent transaction holds, after the "
            "session's lock_timeout (nothing of the transaction was written; it may be retried): "
            "canceling statement due to lock timeout",
        ),
        (
            "statement_timeout",
            StatementCanceledError,
            "PostgreSQL canceled the statement (the server is up: the session's "
            "statement_timeout ran out, or a cancel request ended it; nothing of the transaction "
            "was written, it may be retried): canceling statement due to statement timeout",
        ),
    ],
)
def test_a_timeout_the_url_sets_is_named_not_an_outage_of_the_server(
    postgres_dsn: str, setting: str, error: type[StorageUnavailableError], message: str
) -> None:
    """An append waiting on a lock another session holds, past a timeout the URL's options set.

    It said "PostgreSQL is unavailable", as if the server were down. Still a
    StorageUnavailableError, so what rides out outages retries it: the lock passes.
    """
    options = conninfo_to_dict(postgres_dsn)["options"]
    url = make_conninfo(postgres_dsn, options=f"{options} -c{setting}=300")
    with open_journal(url) as journal:
        journal.append("a", [NewEvent.of(0)], expected_sequence_nr=0)
        with psycopg.connect(postgres_dsn) as locker:
            locker.execute("LOCK TABLE messages IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(StorageError) as caught:
                journal.append("a", [NewEvent.of(1)])
            locker.rollback()
        assert type(caught.value) is error
        assert str(caught.value).startswith(message)
        assert is_outage(caught.value)
        assert journal.highest_sequence_nr("a") == 1
