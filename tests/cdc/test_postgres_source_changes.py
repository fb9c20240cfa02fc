"""What a PostgreSQL change source (wal2json) reads: inserts, updates and deletes in commit
order with increasing positions, values of every type, JSON and numerics a double cannot
hold, toasted columns, key changes, snapshots, and the messages and TRUNCATEs it skips.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Sequence

import psycopg
import pytest

from ordo.cdc.change import ChangeOp, mutation_problems
from ordo.cdc.change_rows import ChangeRows, key_text
from ordo.cdc.key_form import keyed_in_form
from ordo.cdc.materializer import materialize_partition
from ordo.cdc.mutation import Audit, Mutation
from ordo.cdc.row_state import PartitionState
from ordo.cdc.schema_catalog import ResolvedSchema
from ordo.errors import CaptureError
from ordo.storage.postgres.change_source import PostgresChangeSource
from ordo.storage.postgres.wal2json import POSITIONS_PER_LSN, format_lsn, parse_lsn
from postgres_source_support import Capture, summary, with_server_option

pytestmark = pytest.mark.postgres


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

    assert summary(window.mutations) == [
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
        "raw": "0102",
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


def test_doubles_keep_every_digit_whatever_float_output_the_database_sets(
    run: Callable[..., None], capture: Capture, postgres_dsn: str
) -> None:
    """The capture reads doubles from their output text, which `extra_float_digits` shapes: a
    database or role that sets it to 0 or less (`ALTER DATABASE ... SET extra_float_digits =
    0`, as older clients wanted) has float8 written with 15 significant digits, so
    0.30000000000000004 was captured as 0.3, in changes and snapshots alike, and materialized
    as a value the source does not hold. The capture's sessions set it as they set TimeZone
    and DateStyle."""
    run("CREATE TABLE ratios (id int PRIMARY KEY, f float8, r real)")
    source = capture("ratios", dsn=with_server_option(postgres_dsn, "-cextra_float_digits=0"))
    run("INSERT INTO ratios VALUES (1, 0.1::float8 + 0.2::float8, 16777217::real)")
    expected = {"f": 0.1 + 0.2, "r": 16777216.0}

    [captured] = source.peek(max_changes=10).mutations
    [snapshot] = source.snapshot("ratios")

    assert {name: cell.value for name, cell in captured.cells.items()} == expected
    assert {name: cell.value for name, cell in snapshot.cells.items()} == expected


def test_dates_and_timestamps_beyond_iso_8601_are_dead_lettered_naming_the_column(
    run: Callable[..., None], capture: Capture
) -> None:
    """PostgreSQL's `infinity`, BC dates and years past 9999 have no `YYYY-MM-DD` form: they
    are captured as PostgreSQL writes them, in changes and snapshots alike, and their changes
    are dead-lettered naming the column, never shifted to a date a sink would store."""
    run("CREATE TABLE spans (id int PRIMARY KEY, d date, ts timestamp, tz timestamptz)")
    source = capture("spans")
    run(
        "INSERT INTO spans VALUES (1, 'infinity', '-infinity', 'infinity'), "
        "(2, '0044-03-15 BC', '0044-03-15 BC', '10000-01-01 00:00+00'), "
        "(3, '0001-01-01', '1899-12-31 23:59:59.999999', '1800-01-01 00:00 Europe/Amsterdam')"
    )

    changes = source.peek(max_changes=10).mutations
    snapshot = list(source.snapshot("spans"))
    (schema,) = source.schemas()

    for captured in (changes, snapshot):
        assert [mutation_problems(m, schema) for m in captured] == [
            [
                "column 'd': 'infinity' is not a date",
                "column 'ts': '-infinity' is not a timestamp",
                "column 'tz': 'infinity' is not a timestamp",
            ],
            [
                "column 'd': '0044-03-15 BC' is not a date",
                "column 'ts': '0044-03-15 00:00:00 BC' is not a timestamp",
                "column 'tz': '10000-01-01 00:00:00+00' is not a timestamp",
            ],
            [],
        ]
        assert {n: c.value for n, c in captured[2].cells.items()} == {
            "d": "0001-01-01",
            "ts": "1899-12-31T23:59:59.999999",
            "tz": "1799-12-31T23:40:28+00:00",
        }


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
            f"column 'tags': {long_tags!r} is JSON that cannot be carried: integer too long "
            "(5,001 digits, at most 4,300)"
        ],
        [],
    ]


def test_json_numbers_a_double_would_round_are_dead_lettered_naming_the_column(
    run: Callable[..., None], capture: Capture
) -> None:
    """json and jsonb keep a number's digits; read as a double, `0.10000000000000000001` was
    captured as 0.1, `1e-400` as 0.0 and `12345678901234567890.5` as 1.2345678901234567e+19,
    and every message and sink held a value the application never wrote, without a word.
    Numbers a double holds as written (`1E+2`, `1.50`, `0.1`) are carried."""
    run("CREATE TABLE docs (id int PRIMARY KEY, body json, tags jsonb)")
    source = capture("docs")
    run(
        """INSERT INTO docs VALUES (1, '{"b": 0.10000000000000000001}', '[1E+2, 1.50, 0.1]')""",
        """INSERT INTO docs VALUES (2, '[1e-400]', '[12345678901234567890.5]')""",
    )
    expected = [
        {"body (not JSON)": '{"b": 0.10000000000000000001}', "tags": [100, 1.5, 0.1]},
        {"body (not JSON)": "[1e-400]", "tags (not JSON)": "[12345678901234567890.5]"},
    ]

    changes = source.peek(max_changes=10).mutations
    snapshot = list(source.snapshot("docs"))

    assert [{n: c.value for n, c in m.cells.items()} for m in changes] == expected
    assert [{n: c.value for n, c in m.cells.items()} for m in snapshot] == expected
    (schema,) = source.schemas()
    assert [mutation_problems(m, schema) for m in changes] == [
        [
            "column 'body': '{\"b\": 0.10000000000000000001}' is JSON that cannot be carried: "
            "number 0.10000000000000000001 is rounded to 0.1 as a double"
        ],
        [
            "column 'body': '[1e-400]' is JSON that cannot be carried: number 1e-400 is rounded "
            "to 0.0 as a double",
            "column 'tags': '[12345678901234567890.5]' is JSON that cannot be carried: number "
            "12345678901234567890.5 is rounded to 1.2345678901234567e+19 as a double",
        ],
    ]


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


def test_an_update_of_a_row_keyed_by_a_toasted_value_takes_the_key_from_the_old_row(
    run: Callable[..., None], capture: Capture
) -> None:
    """wal2json leaves the unchanged key out of the new row, as any unchanged TOASTed column:
    the capture stopped for good at the first update, saying the key columns were missing."""
    run("CREATE TABLE docs (id text PRIMARY KEY, title text)")
    source = capture("docs")
    key = secrets.token_hex(1300)  # 2.6 kB of random hex: indexable, but stored out of line
    run(("INSERT INTO docs VALUES (%s, 'draft')", (key,)))
    run("UPDATE docs SET title = 'final'", "DELETE FROM docs")

    assert summary(source.peek(max_changes=100).mutations) == [
        ("docs", (key,), "upsert", {"title": "draft"}),
        ("docs", (key,), "upsert", {"title": "final"}),
        ("docs", (key,), "delete", {}),
    ]


def test_a_delete_logged_without_its_key_says_the_slot_cannot_move_past_it(
    run: Callable[..., None], capture: Capture
) -> None:
    """The identity was given back after the delete: the old advice (give the table REPLICA
    IDENTITY DEFAULT) was already followed, and the capture stopped at the delete all the same."""
    run("CREATE TABLE docs (id int PRIMARY KEY, n int NOT NULL UNIQUE)")
    source = capture("docs")
    run(
        "INSERT INTO docs VALUES (1, 10)",
        "ALTER TABLE docs REPLICA IDENTITY USING INDEX docs_n_key",
        "DELETE FROM docs",
        "ALTER TABLE docs REPLICA IDENTITY DEFAULT",
    )
    with pytest.raises(CaptureError) as refused:
        source.peek(max_changes=100)
    assert str(refused.value) == (
        "a change of table 'docs' lacks key columns ['id']: it was logged under a replica "
        "identity without them or when the table had another key, and the slot cannot move past "
        "it while the table is keyed by ['id']; capture the table afresh on another slot with "
        "--snapshot and drop this one"
    )


@pytest.mark.parametrize("logged", ["INSERT INTO t VALUES (2, 'b')", "DELETE FROM t"])
def test_a_change_of_a_table_created_again_with_another_key_says_so(
    run: Callable[..., None], capture: Capture, postgres_dsn: str, logged: str
) -> None:
    """The table had REPLICA IDENTITY DEFAULT all along: the error's advice to give it that
    identity was wrong, and only capturing the table afresh on a new slot gets past it."""
    run("CREATE TABLE t (id int PRIMARY KEY, v text)", "INSERT INTO t VALUES (1, 'a')")
    first = capture("t")
    first.close()  # its session holds the slot's capture lock
    run(logged, "DROP TABLE t", "CREATE TABLE t (uid int PRIMARY KEY, v text)")
    rerun = PostgresChangeSource(postgres_dsn, slot=first.slot, tables=("t",))  # reads the catalog

    with rerun, pytest.raises(CaptureError) as refused:
        rerun.peek(max_changes=100)

    message = str(refused.value)
    assert message.startswith("a change of table 't' lacks key columns ['uid']: it has columns")
    assert "written when the table had another key" in message
    assert "capture the table afresh on another slot with --snapshot" in message
    assert "REPLICA IDENTITY" not in message


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

    assert summary(window.mutations) == [
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

    assert summary(window.mutations[1:]) == [
        ("users", (1,), "delete", {}),
        ("users", (2,), "upsert", {"name": "ada"}),
    ]
    assert window.mutations[2].liveness is not None
    _assert_positions(window.mutations)


def test_a_double_key_of_minus_zero_is_zero(run: Callable[..., None], capture: Capture) -> None:
    """PostgreSQL holds -0.0 and 0.0 as one key of a double or real, and may move a row from one
    to the other. Captured as written they were two fold keys (the fold keys by the JSON text):
    an UPDATE from -0.0 to 0.0 compared equal, so no delete went out, and the fold kept the
    -0.0 row the source no longer had."""
    run("CREATE TABLE t (d float8, r real, b bytea, n int, PRIMARY KEY (d, r, b))")
    source = capture("t")
    run("INSERT INTO t VALUES ('-0', '-0', '\\xABCD', 1)")
    snapshot = list(source.snapshot("t"))
    run("UPDATE t SET d = 0.0, n = 2")
    run("UPDATE t SET d = '-0', r = 0.0, n = 3")
    run("DELETE FROM t")

    window = source.peek(max_changes=100)

    assert [key_text(m.partition_key) for m in [*snapshot, *window.mutations]] == [
        '[0.0,0.0,"abcd"]'
    ] * 5
    assert [kind for _, _, kind, _ in summary(window.mutations)] == ["upsert"] * 3 + ["delete"]


def test_bytes_are_lowercase_hex_as_ingested_in_snapshots_and_changes(
    run: Callable[..., None], capture: Capture
) -> None:
    """bytea, key or not, is lowercase hex without PostgreSQL's `\\x`, however written: the
    form `ordo cdc ingest` gives a bytes key, the SQLite capture writes, and a sink reads back.
    Captured with its `\\x`, a row was one fold key (`["\\\\xabcd"]`) and the same row
    ingested another (`["abcd"]`), one row of the sink: a delete of either emptied the table
    while the fold kept the other (G6)."""
    run("CREATE TABLE blobs (k bytea, n int, v bytea, PRIMARY KEY (k, n))")
    run("INSERT INTO blobs VALUES ('\\xABCD', 1, '\\x0A')")
    source = capture("blobs")
    snapshot = list(source.snapshot("blobs"))
    run("UPDATE blobs SET v = '\\xFF'")
    run("DELETE FROM blobs")
    changes = source.peek(max_changes=100).mutations
    (schema,) = source.schemas()
    ingested = Mutation(
        table="blobs", partition_key=("\\xABCD", 1), row_deleted_at=1, audit=Audit(source="t")
    )

    captured = [*snapshot, *changes]
    keys = [key_text(m.partition_key) for m in [*captured, keyed_in_form(ingested, schema)]]
    assert keys == ['["abcd",1]'] * 4
    assert [{n: c.value for n, c in m.cells.items()} for m in captured] == [
        {"v": "0a"},
        {"v": "ff"},
        {},
    ]
    assert [mutation_problems(m, schema) for m in captured] == [[], [], []]
    read, update, delete = materialize_partition(
        PartitionState(), captured, lambda _: ResolvedSchema(schema_id=1, schema=schema)
    ).messages
    assert [read.op, update.op, delete.op] == [ChangeOp.READ, ChangeOp.UPDATE, ChangeOp.DELETE]
    assert (update.before, delete.before, delete.after) == (read.after, update.after, None)


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


def test_a_snapshot_reads_the_existing_rows(run: Callable[..., None], capture: Capture) -> None:
    run(
        "CREATE TABLE users (id int PRIMARY KEY, name text)",
        "INSERT INTO users VALUES (2, 'bob'), (1, 'ada'), (3, NULL)",
    )
    source = capture("users")
    confirmed = source.status().confirmed_position
    assert confirmed is not None

    rows = list(source.snapshot("users"))

    assert summary(rows) == [
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
