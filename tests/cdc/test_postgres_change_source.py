from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from ordo.cdc.capture import Capture as CaptureRunner
from ordo.cdc.change import mutation_problems
from ordo.cdc.change_rows import ChangeRows
from ordo.cdc.mutation import Mutation
from ordo.cdc.ports import ChangeSource
from ordo.cdc.publisher import Publisher
from ordo.cdc.schema import Column, ColumnType
from ordo.cdc.schema_registry import SchemaRegistry
from ordo.errors import (
    CaptureError,
    IncompatibleSchemaError,
    NoPrimaryKeyError,
    ReplicationSlotMissingError,
    StorageAccessError,
    UnmappableColumnTypeError,
)
from ordo.settings import CaptureSettings
from ordo.storage.open import stores_at
from ordo.storage.parquet.change_log import ParquetChangeLog
from ordo.storage.postgres.change_source import PostgresChangeSource
from ordo.storage.postgres.throwaway import ThrowawayPostgres
from ordo.storage.postgres.wal2json import POSITIONS_PER_LSN, format_lsn, parse_lsn

pytestmark = pytest.mark.postgres

Capture = Callable[..., PostgresChangeSource]


@pytest.fixture
def run(postgres_dsn: str) -> Callable[..., None]:
    """Run statements in one transaction, committed durably so the slot can decode it at once.

    The throwaway server runs with synchronous_commit=off, which leaves a commit unflushed (and
    invisible to logical decoding) for up to the WAL writer's delay.
    """

    def execute(*statements: str | tuple[str, Sequence[object]]) -> None:
        with psycopg.connect(postgres_dsn) as conn:
            conn.execute("SET synchronous_commit = on")
            for statement in statements:
                query, params = (statement, ()) if isinstance(statement, str) else statement
                conn.execute(query, params)

    return execute


@pytest.fixture
def capture(postgres_dsn: str) -> Iterator[Capture]:
    """Creates sources on slots unique to the test (slots are cluster-wide); drops them after."""
    opened: list[PostgresChangeSource] = []

    def factory(*tables: str, slot: str | None = None, create: bool = True) -> PostgresChangeSource:
        name = slot or f"ordo_test_{secrets.token_hex(6)}"
        source = PostgresChangeSource(postgres_dsn, slot=name, tables=tables)
        opened.append(source)
        if create:
            source.create()
        return source

    yield factory
    for source in opened:
        source.drop()
        source.close()


def _summary(mutations: Sequence[Mutation]) -> list[tuple[object, ...]]:
    """(table, key, kind, values) per mutation: kind is "upsert" or "delete"."""
    return [
        (
            m.table,
            m.partition_key,
            "delete" if m.row_deleted_at is not None else "upsert",
            {name: cell.value for name, cell in m.cells.items()},
        )
        for m in mutations
    ]


def _assert_positions(mutations: Sequence[Mutation]) -> None:
    """Positions strictly increase; every write time of a mutation is its position."""
    positions = [m.audit.position for m in mutations]
    assert positions == sorted(set(positions))
    for m in mutations:
        times = {cell.write_time for cell in m.cells.values()}
        times |= {t for t in (m.row_deleted_at,) if t is not None}
        times |= {m.liveness.write_time} if m.liveness is not None else set()
        assert times == {m.audit.position}


def test_lsns_parse_and_format() -> None:
    assert parse_lsn("16/B374D848") == 0x16_B374_D848
    assert format_lsn(0x16_B374_D848) == "16/B374D848"
    assert format_lsn(parse_lsn("0/0")) == "0/0"


def test_inserts_updates_and_deletes_arrive_in_commit_order(
    run: Callable[..., None], capture: Capture
) -> None:
    run("CREATE TABLE users (id int PRIMARY KEY, name text, age int)")
    source = capture("users")
    run("INSERT INTO users VALUES (1, 'ada', 36), (2, 'bob', NULL)")
    run("UPDATE users SET age = 37 WHERE id = 1")
    run("DELETE FROM users WHERE id = 2")

    window = source.peek(max_changes=100)

    assert _summary(window.mutations) == [
        ("users", (1,), "upsert", {"name": "ada", "age": 36}),
        ("users", (2,), "upsert", {"name": "bob", "age": None}),
        ("users", (1,), "upsert", {"name": "ada", "age": 37}),
        ("users", (2,), "delete", {}),
    ]
    _assert_positions(window.mutations)
    assert all(m.liveness is not None for m in window.mutations[:3])
    audit = window.mutations[0].audit
    assert (audit.source, audit.segment) == ("postgresql", source.name)
    assert audit.replica.isdigit()
    assert audit.captured_at_us > 0
    assert window.mutations[-1].audit.position == window.up_to * POSITIONS_PER_LSN


def test_values_have_their_logical_types_in_changes_and_snapshots(
    run: Callable[..., None], capture: Capture
) -> None:
    run(
        "CREATE TABLE kinds (id bigint PRIMARY KEY, price numeric(10, 3), ratio float8, "
        "at timestamptz, day date, raw bytea, doc jsonb, ok bool, code char(3), u uuid)"
    )
    source = capture("kinds")
    run(
        "INSERT INTO kinds VALUES (7, 12.5, 0.25, '2024-01-02 03:04:05.5+00', '2024-01-02', "
        "'\\x0102', '{\"a\": [1, 2.5]}', true, 'ab', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11')"
    )
    expected = {
        "price": "12.500",
        "ratio": 0.25,
        "at": "2024-01-02T03:04:05.500000+00:00",
        "day": "2024-01-02",
        "raw": "\\x0102",
        "doc": {"a": [1, 2.5]},
        "ok": True,
        "code": "ab ",
        "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
    }

    [captured] = source.peek(max_changes=10).mutations
    [snapshot] = source.snapshot("kinds")

    assert captured.partition_key == snapshot.partition_key == (7,)
    assert {name: cell.value for name, cell in captured.cells.items()} == expected
    assert {name: cell.value for name, cell in snapshot.cells.items()} == expected


def test_json_a_double_cannot_hold_is_dead_lettered_and_numerics_keep_their_digits(
    run: Callable[..., None], capture: Capture
) -> None:
    """json keeps `1e999` as written, which Python reads as an infinity: the window could not be
    published and the capture stopped at it for good. jsonb writes it out as an integer,
    carried exactly up to the 4300 digits Python converts; a numeric of more digits stopped the
    capture too, and a small one was `1E-7` in changes but `0.0000001` in snapshots."""
    run("CREATE TABLE docs (id int PRIMARY KEY, body json, tags jsonb, amount numeric)")
    source = capture("docs")
    run(
        """INSERT INTO docs VALUES (1, '{"a": [1, 1e999]}', '[1e999, 1]', 1e400)""",
        """INSERT INTO docs VALUES (2, '{"a": 1}', '[1e5000]', 1e5000)""",
        """INSERT INTO docs VALUES (3, '[]', '[]', 0.0000001)""",
    )
    long_tags = "[1" + "0" * 5000 + "]"
    expected = [
        {"body (not JSON)": '{"a": [1, 1e999]}', "tags": [10**999, 1], "amount": str(10**400)},
        {"body": {"a": 1}, "tags (not JSON)": long_tags, "amount": "1" + "0" * 5000},
        {"body": [], "tags": [], "amount": "0.0000001"},
    ]

    changes = source.peek(max_changes=10).mutations
    snapshot = list(source.snapshot("docs"))

    assert [{n: c.value for n, c in m.cells.items()} for m in changes] == expected
    assert [{n: c.value for n, c in m.cells.items()} for m in snapshot] == expected
    ChangeRows.from_mutations(changes)  # standard JSON: the window can be published
    (schema,) = source.schemas()
    assert [mutation_problems(m, schema) for m in changes] == [
        [
            "column 'body': '{\"a\": [1, 1e999]}' is JSON that cannot be carried: number 1e999 "
            "is out of the range of a double"
        ],
        [
            f"column 'tags': {long_tags!r} is JSON that cannot be carried: integer of 5001 "
            "digits is longer than 4300"
        ],
        [],
    ]


def test_a_json_key_that_cannot_be_carried_is_captured_as_a_null_key(
    run: Callable[..., None], capture: Capture
) -> None:
    run("CREATE TABLE keyed (k jsonb PRIMARY KEY, n int)")
    source = capture("keyed")
    run("INSERT INTO keyed VALUES ('1e5000', 1), ('1e400', 2)")

    longer, carried = source.peek(max_changes=10).mutations

    assert longer.partition_key == (None,)
    assert carried.partition_key == (10**400,)
    (schema,) = source.schemas()
    assert mutation_problems(longer, schema) == ["key column 'k': None is not a json"]


def test_an_update_leaves_out_an_unchanged_toasted_column(
    run: Callable[..., None], capture: Capture
) -> None:
    run("CREATE TABLE docs (id int PRIMARY KEY, title text, body text)")
    source = capture("docs")
    body = secrets.token_hex(100_000)  # 200 kB of random hex: stored out of line
    run(("INSERT INTO docs VALUES (1, 'draft', %s)", (body,)))
    run("UPDATE docs SET title = 'final' WHERE id = 1")

    insert, update = source.peek(max_changes=100).mutations

    assert insert.cells["body"].value == body
    assert {name: cell.value for name, cell in update.cells.items()} == {"title": "final"}
    assert update.liveness is not None


def test_a_transaction_over_two_tables_keeps_its_order(
    run: Callable[..., None], capture: Capture
) -> None:
    run(
        "CREATE TABLE orders (id int PRIMARY KEY, total int)",
        "CREATE TABLE lines (order_id int, nr int, sku text, PRIMARY KEY (order_id, nr))",
        "CREATE TABLE ignored (id int PRIMARY KEY)",
    )
    source = capture("orders", "lines")
    run(
        "INSERT INTO lines VALUES (1, 1, 'apple')",
        "INSERT INTO ignored VALUES (1)",
        "INSERT INTO orders VALUES (1, 3)",
        "INSERT INTO lines VALUES (1, 2, 'pear')",
    )

    window = source.peek(max_changes=100)

    assert _summary(window.mutations) == [
        ("lines", (1, 1), "upsert", {"sku": "apple"}),
        ("orders", (1,), "upsert", {"total": 3}),
        ("lines", (1, 2), "upsert", {"sku": "pear"}),
    ]
    _assert_positions(window.mutations)


def test_positions_follow_commits_when_transactions_interleave(
    postgres_dsn: str, run: Callable[..., None], capture: Capture
) -> None:
    run("CREATE TABLE events (id int PRIMARY KEY)")
    source = capture("events")
    with psycopg.connect(postgres_dsn) as first:
        first.execute("SET synchronous_commit = on")
        first.execute("INSERT INTO events VALUES (1)")  # written first, committed last
        run("INSERT INTO events VALUES (2)")
        first.execute("INSERT INTO events VALUES (3)")

    window = source.peek(max_changes=100)

    assert [m.partition_key for m in window.mutations] == [(2,), (1,), (3,)]
    _assert_positions(window.mutations)


def test_rows_of_one_multi_row_insert_get_distinct_positions(
    postgres_dsn: str, run: Callable[..., None], capture: Capture
) -> None:
    run("CREATE TABLE bulk (id int PRIMARY KEY)")
    source = capture("bulk")
    with psycopg.connect(postgres_dsn) as conn:
        conn.execute("SET synchronous_commit = on")
        with conn.cursor().copy("COPY bulk FROM STDIN") as copy:  # one WAL record, many rows
            for i in range(50):
                copy.write_row((i,))

    window = source.peek(max_changes=1000)

    assert [m.partition_key for m in window.mutations] == [(i,) for i in range(50)]
    _assert_positions(window.mutations)


def test_a_primary_key_change_is_a_delete_and_an_insert(
    run: Callable[..., None], capture: Capture
) -> None:
    run("CREATE TABLE users (id int PRIMARY KEY, name text)")
    source = capture("users")
    run("INSERT INTO users VALUES (1, 'ada')")
    run("UPDATE users SET id = 2 WHERE id = 1")

    window = source.peek(max_changes=100)

    assert _summary(window.mutations[1:]) == [
        ("users", (1,), "delete", {}),
        ("users", (2,), "upsert", {"name": "ada"}),
    ]
    assert window.mutations[2].liveness is not None
    _assert_positions(window.mutations)


def test_a_key_change_under_replica_identity_full_keeps_toasted_columns(
    run: Callable[..., None], capture: Capture
) -> None:
    run(
        "CREATE TABLE docs (id int PRIMARY KEY, body text)",
        "ALTER TABLE docs REPLICA IDENTITY FULL",
    )
    source = capture("docs")
    body = secrets.token_hex(100_000)
    run(("INSERT INTO docs VALUES (1, %s)", (body,)))
    run("UPDATE docs SET id = 2 WHERE id = 1")

    _, delete, insert = source.peek(max_changes=100).mutations

    assert (delete.partition_key, delete.row_deleted_at is not None) == ((1,), True)
    assert insert.partition_key == (2,)
    assert insert.cells["body"].value == body


def test_peek_consumes_nothing_and_advance_moves_past_a_window(
    run: Callable[..., None], capture: Capture
) -> None:
    run("CREATE TABLE users (id int PRIMARY KEY)")
    source = capture("users")
    run("INSERT INTO users VALUES (1)")
    run("INSERT INTO users VALUES (2)")

    first = source.peek(max_changes=100)
    assert source.peek(max_changes=100) == first

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

    assert source.peek(max_changes=10).up_to == confirmed

    run("INSERT INTO other VALUES (1)")
    window = source.peek(max_changes=10)
    assert window.mutations == []
    assert confirmed is not None
    assert window.up_to > confirmed
    source.advance(up_to=window.up_to)
    assert source.status().confirmed_position == window.up_to


def test_max_changes_never_splits_a_transaction(run: Callable[..., None], capture: Capture) -> None:
    run("CREATE TABLE users (id int PRIMARY KEY)")
    source = capture("users")
    run(*(f"INSERT INTO users VALUES ({i})" for i in range(10)))
    run("INSERT INTO users VALUES (10)")

    first = source.peek(max_changes=1)
    assert [m.partition_key for m in first.mutations] == [(i,) for i in range(10)]

    source.advance(up_to=first.up_to)
    second = source.peek(max_changes=1)
    assert [m.partition_key for m in second.mutations] == [(10,)]


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


def test_a_dropped_slot_is_reported_and_nothing_is_advanced(
    postgres_server_dsn: str, run: Callable[..., None], capture: Capture
) -> None:
    run("CREATE TABLE users (id int PRIMARY KEY)")
    source = capture("users")
    run("INSERT INTO users VALUES (1)")
    window = source.peek(max_changes=100)
    with psycopg.connect(postgres_server_dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_drop_replication_slot(%s)", (source.name,))

    with pytest.raises(ReplicationSlotMissingError, match=source.name):
        source.peek(max_changes=100)
    with pytest.raises(ReplicationSlotMissingError):
        source.advance(up_to=window.up_to)
    with pytest.raises(ReplicationSlotMissingError):
        source.status()
    with psycopg.connect(postgres_server_dsn) as admin:
        slots = admin.execute(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s", (source.name,)
        ).fetchone()
    assert slots == (0,)


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


def test_schemas_come_from_the_catalog(run: Callable[..., None], capture: Capture) -> None:
    run("CREATE TABLE lines (sku varchar(20), nr serial, qty int NOT NULL, PRIMARY KEY (nr, sku))")
    source = capture("lines", create=False)

    [schema] = source.schemas()

    assert schema.table == "lines"
    assert schema.columns == (
        Column(name="sku", type=ColumnType.STRING, nullable=False),
        Column(name="nr", type=ColumnType.LONG, nullable=False),
        Column(name="qty", type=ColumnType.LONG, nullable=False),
    )
    assert (schema.partition_key, schema.clustering_key) == (("nr", "sku"), ())


def test_a_table_without_primary_key_is_refused(run: Callable[..., None], capture: Capture) -> None:
    run("CREATE TABLE loose (id int)")
    source = capture("loose", create=False)
    with pytest.raises(NoPrimaryKeyError, match=r"'loose' has no primary key: .*ADD PRIMARY KEY"):
        source.schemas()


def test_a_table_without_primary_key_is_refused_for_it_before_its_column_types(
    run: Callable[..., None], capture: Capture
) -> None:
    """As on SQLite: the key is the first thing to fix."""
    run("CREATE TABLE spots (spot point)")
    source = capture("spots", create=False)
    with pytest.raises(NoPrimaryKeyError, match=r"'spots' has no primary key: .*ADD PRIMARY KEY"):
        source.schemas()


def test_an_unmappable_column_type_is_refused(run: Callable[..., None], capture: Capture) -> None:
    run("CREATE TABLE places (id int PRIMARY KEY, spot point)")
    source = capture("places", create=False)
    with pytest.raises(UnmappableColumnTypeError, match="'places' column 'spot' has type 'point'"):
        source.schemas()


def test_a_missing_table_is_a_capture_error(capture: Capture) -> None:
    source = capture("nowhere", create=False)
    with pytest.raises(CaptureError, match="'nowhere'"):
        source.schemas()


def test_a_refused_table_creates_no_slot(postgres_dsn: str, capture: Capture) -> None:
    """A slot left by a refused capture would make the server keep WAL for nobody."""
    source = capture("nowhere", create=False)
    with pytest.raises(CaptureError, match="'nowhere'"):
        source.create()
    with psycopg.connect(postgres_dsn) as conn:
        slots = conn.execute(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s", (source.name,)
        ).fetchone()
    assert slots == (0,)


def test_create_reuses_its_slot_and_refuses_a_foreign_one(
    postgres_dsn: str, run: Callable[..., None], capture: Capture
) -> None:
    run("CREATE TABLE users (id int PRIMARY KEY)")
    source = capture("users")
    source.create()  # the same slot again: reused
    foreign = capture("users", create=False)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_create_logical_replication_slot(%s, 'test_decoding')", (foreign.name,)
        )
    with pytest.raises(CaptureError, match="not a wal2json slot"):
        foreign.create()


def _slot_count(dsn: str, name: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s", (name,)
        ).fetchone()
    return 0 if row is None else int(row[0])


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
    assert _slot_count(postgres_dsn, source.name) == 0


def test_a_capture_by_a_role_that_cannot_replicate_is_refused(
    postgres_dsn: str, run: Callable[..., None]
) -> None:
    role = f"ordo_reader_{secrets.token_hex(6)}"
    run("CREATE TABLE users (id int PRIMARY KEY)", f"CREATE ROLE {role} LOGIN NOREPLICATION")
    source = PostgresChangeSource(
        make_conninfo(postgres_dsn, user=role),
        slot=f"ordo_test_{secrets.token_hex(6)}",
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
    assert _slot_count(postgres_dsn, source.name) == 0


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


def test_status_shows_retained_wal(run: Callable[..., None], capture: Capture) -> None:
    run("CREATE TABLE users (id int PRIMARY KEY, name text)")
    source = capture("users")
    run(*(f"INSERT INTO users VALUES ({i}, 'x')" for i in range(100)))

    status = source.status()

    assert (status.name, status.tables) == (source.name, ("users",))
    assert status.retained_bytes is not None
    assert status.retained_bytes > 0
    assert status.confirmed_position is not None
    assert status.head_position is not None
    assert status.head_position >= status.confirmed_position


def test_a_snapshot_reads_the_existing_rows(run: Callable[..., None], capture: Capture) -> None:
    run(
        "CREATE TABLE users (id int PRIMARY KEY, name text)",
        "INSERT INTO users VALUES (2, 'bob'), (1, 'ada'), (3, NULL)",
    )
    source = capture("users")
    confirmed = source.status().confirmed_position
    assert confirmed is not None

    rows = list(source.snapshot("users"))

    assert _summary(rows) == [
        ("users", (1,), "upsert", {"name": "ada"}),
        ("users", (2,), "upsert", {"name": "bob"}),
        ("users", (3,), "upsert", {"name": None}),
    ]
    assert {r.write_time for r in rows} == {confirmed * POSITIONS_PER_LSN}
    assert all(r.liveness is not None for r in rows)
    assert [r.audit.position for r in rows] == [1, 2, 3]
    assert rows[0].audit.segment.startswith(f"{source.name}.snapshot.")
    run("INSERT INTO users VALUES (4, 'cy')")
    [later] = source.peek(max_changes=10).mutations
    assert later.write_time > rows[0].write_time


def test_logical_messages_are_ignored(run: Callable[..., None], capture: Capture) -> None:
    run("CREATE TABLE users (id int PRIMARY KEY)")
    source = capture("users")
    run("SELECT pg_logical_emit_message(false, 'ordo', 'outside a transaction')")
    run("SELECT pg_logical_emit_message(true, 'ordo', 'inside')", "INSERT INTO users VALUES (1)")

    assert [m.partition_key for m in source.peek(max_changes=100).mutations] == [(1,)]


def test_truncate_is_logged_and_skipped(
    run: Callable[..., None], capture: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    run("CREATE TABLE users (id int PRIMARY KEY)")
    source = capture("users")
    run("INSERT INTO users VALUES (1)")
    run("TRUNCATE users")

    with caplog.at_level(logging.WARNING):
        window = source.peek(max_changes=100)

    assert [m.partition_key for m in window.mutations] == [(1,)]
    assert "TRUNCATE" in caplog.text


def test_a_column_added_while_capturing_is_captured(
    run: Callable[..., None], capture: Capture
) -> None:
    run("CREATE TABLE users (id int PRIMARY KEY)")
    source = capture("users")
    source.peek(max_changes=10)  # caches the schema
    run("ALTER TABLE users ADD COLUMN email text", "INSERT INTO users VALUES (1, 'a@b.c')")

    [insert] = source.peek(max_changes=10).mutations

    assert insert.cells["email"].value == "a@b.c"


@pytest.mark.parametrize(
    "alter",
    ["ALTER TABLE items DROP COLUMN note", "ALTER TABLE items ALTER COLUMN note TYPE int USING 0"],
)
def test_changes_made_before_an_accepted_incompatible_change_are_read_as_written(
    run: Callable[..., None], capture: Capture, postgres_dsn: str, tmp_path: Path, alter: str
) -> None:
    """The slot still holds them after the ALTER: read with the catalog's new types, the
    capture failed on every run and the slot kept its WAL for good."""
    run("CREATE TABLE items (id int PRIMARY KEY, note text, qty int)")
    source = capture("items")
    log = ParquetChangeLog(tmp_path / "log")
    with stores_at(postgres_dsn) as stores:
        registry = SchemaRegistry(stores.schemas)
        runner = CaptureRunner(source, Publisher(log), registry)
        runner.run(until_idle=True)
        run("INSERT INTO items VALUES (1, 'cup', 2)", alter)
        run("INSERT INTO items (id, qty) VALUES (2, 3)")
        with pytest.raises(IncompatibleSchemaError):
            runner.run(until_idle=True)
        registry.accept("items", 2)
        totals = runner.run(until_idle=True)
        first, second = registry.versions("items")

    assert totals.published == {"items": 2}
    logged = {m.partition_key: m for m in log.read("items")}
    assert logged[(1,)].cells["note"].value == "cup"
    assert (logged[(1,)].schema_id, logged[(2,)].schema_id) == (first.schema_id, second.schema_id)
    for version, key in ((first, (1,)), (second, (2,))):
        assert mutation_problems(logged[key], version.schema) == []
    assert source.peek(max_changes=10).mutations == []


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
    assert _summary(logged) == [
        ("users", (1,), "upsert", {"name": "ada"}),
        ("users", (2,), "upsert", {"name": "bob"}),
        ("users", (1,), "upsert", {"name": "ann"}),
        ("users", (2,), "delete", {}),
        ("users", (3,), "upsert", {"name": "cy"}),
    ]
    assert len({m.audit.position for m in logged}) == 5
