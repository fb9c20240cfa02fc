"""SQLite capture by triggers: every kind of write, schemas, snapshot, and the capture loop."""

from __future__ import annotations

import json
import math
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import closing
from datetime import timedelta
from pathlib import Path

import pytest

from ordo.cdc import ColumnType, Publisher, SchemaRegistry
from ordo.cdc.capture import Capture, CaptureTotals, PublishedWindow
from ordo.cdc.change import mutation_problems
from ordo.cdc.change_rows import key_text
from ordo.cdc.json_text import parse_json
from ordo.cdc.materializer import materialize_partition
from ordo.cdc.mutation import Mutation
from ordo.cdc.row_state import PartitionState
from ordo.cdc.schema import TableSchema
from ordo.cdc.schema_catalog import ResolvedSchema
from ordo.clock import ManualClock
from ordo.errors import (
    CaptureError,
    IncompatibleSchemaError,
    NoPrimaryKeyError,
    UnmappableColumnTypeError,
)
from ordo.settings import CaptureSettings
from ordo.storage.open import stores_at
from ordo.storage.parquet import ParquetChangeLog
from ordo.storage.sqlite.change_source import SQLiteChangeSource


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL, active BOOLEAN, "
            "photo BLOB, score REAL)"
        )
        conn.execute(
            "CREATE TABLE orders (id TEXT, line INTEGER, qty INTEGER, PRIMARY KEY (id, line))"
        )
    return path


@pytest.fixture
def source(database: Path) -> Iterator[SQLiteChangeSource]:
    opened = SQLiteChangeSource(database, ["users", "orders"])
    opened.install()
    yield opened
    opened.close()


def _run(database: Path, *statements: str) -> None:
    with sqlite3.connect(database) as conn:
        for statement in statements:
            conn.execute(statement)


def test_schemas_come_from_the_catalog(source: SQLiteChangeSource) -> None:
    users, orders = source.schemas()
    assert [(c.name, c.type, c.nullable) for c in users.columns] == [
        ("id", ColumnType.LONG, False),
        ("name", ColumnType.STRING, False),
        ("active", ColumnType.BOOLEAN, True),
        ("photo", ColumnType.BYTES, True),
        ("score", ColumnType.DOUBLE, True),
    ]
    assert orders.partition_key == ("id", "line")


def test_inserts_updates_deletes_and_key_changes_become_mutations(
    source: SQLiteChangeSource, database: Path
) -> None:
    _run(
        database,
        "INSERT INTO users VALUES (1, 'ada', 1, x'0102', 1.5)",
        "UPDATE users SET score = 2.5 WHERE id = 1",
        "UPDATE users SET id = 2 WHERE id = 1",
        "DELETE FROM users WHERE id = 2",
    )
    window = source.peek(max_changes=10)
    kinds = [
        (m.partition_key, m.liveness is not None, m.row_deleted_at is not None)
        for m in window.mutations
    ]
    assert kinds == [
        ((1,), True, False),
        ((1,), True, False),
        ((1,), False, True),
        ((2,), True, False),
        ((2,), False, True),
    ]
    first = window.mutations[0]
    assert {c: cell.value for c, cell in first.cells.items()} == {
        "name": "ada",
        "active": True,
        "photo": "0102",
        "score": 1.5,
    }
    positions = [m.audit.position for m in window.mutations]
    assert positions == sorted(positions)
    assert window.up_to == positions[-1]


def test_keys_get_the_change_logs_key_text_whatever_sqlite_wrote(
    source: SQLiteChangeSource, database: Path
) -> None:
    ids = ["plain id", "zoë", 'a"b', "tab\there", "1.5"]
    _run(
        database,
        *(f"INSERT INTO orders VALUES ('{i.replace(chr(39), chr(39) * 2)}', 2, 1)" for i in ids),
    )
    _run(database, "INSERT INTO orders VALUES (1.5, 2.5, 1)")  # a REAL in an INTEGER column
    rows = source.peek(max_changes=10).rows
    expected = [*((i, 2) for i in ids), ("1.5", 2.5)]
    assert rows.column("partition_key") == [key_text(k) for k in expected]
    assert [m.partition_key for m in rows.mutations()] == expected


def test_peek_does_not_consume_and_advance_forgets(
    source: SQLiteChangeSource, database: Path
) -> None:
    _run(database, "INSERT INTO orders VALUES ('a', 1, 3)", "INSERT INTO orders VALUES ('a', 2, 4)")
    first = source.peek(max_changes=1)
    assert source.peek(max_changes=1) == first
    source.advance(up_to=first.up_to)
    second = source.peek(max_changes=10)
    assert [m.partition_key for m in second.mutations] == [("a", 2)]
    assert source.status().retained_changes == 1


def test_a_capture_takes_and_forgets_only_the_changes_of_its_tables(
    source: SQLiteChangeSource, database: Path
) -> None:
    """Triggers an earlier capture installed keep logging other tables' changes: those wait for
    the capture that names them (and its schema checks) instead of being published here."""
    _run(
        database,
        "INSERT INTO users (id, name) VALUES (1, 'a')",
        "INSERT INTO orders VALUES ('o', 1, 2)",
    )
    orders_only = SQLiteChangeSource(database, ["orders"])
    try:
        window = orders_only.peek(max_changes=10)
        orders_only.advance(up_to=window.up_to)
        assert orders_only.status().retained_changes == 0
    finally:
        orders_only.close()

    assert [m.table for m in window.mutations] == ["orders"]
    assert [m.table for m in source.peek(max_changes=10).mutations] == ["users"]
    assert source.status().retained_changes == 1


def test_snapshot_reads_existing_rows_at_the_head(
    source: SQLiteChangeSource, database: Path
) -> None:
    _run(database, "INSERT INTO users VALUES (7, 'bob', 0, NULL, NULL)")
    rows = list(source.snapshot("users"))
    assert len(rows) == 1
    assert rows[0].audit.is_snapshot
    assert rows[0].cells["active"].value is False
    assert rows[0].liveness is not None
    assert rows[0].liveness.write_time == source.peek(max_changes=10).up_to


def test_bad_tables_are_rejected(database: Path) -> None:
    _run(database, "CREATE TABLE loose (a TEXT)", "CREATE TABLE odd (id INTEGER PRIMARY KEY, x)")
    with pytest.raises(NoPrimaryKeyError, match="loose"):
        SQLiteChangeSource(database, ["loose"]).install()
    with pytest.raises(UnmappableColumnTypeError, match="'x'"):
        SQLiteChangeSource(database, ["odd"]).install()
    with pytest.raises(CaptureError, match="missing"):
        SQLiteChangeSource(database, ["missing"]).install()
    with pytest.raises(CaptureError, match="no SQLite database at"):
        SQLiteChangeSource(database.parent / "typo.db", ["users"])
    assert not (database.parent / "typo.db").exists()


def test_a_table_without_a_key_or_types_is_refused_for_its_key_naming_the_columns_to_type(
    database: Path,
) -> None:
    """Adding the key means creating the table again, which is when the types are declared:
    refused for the types first, the table would be created again twice."""
    _run(database, "CREATE TABLE bare (a, b TEXT, c)")
    with pytest.raises(NoPrimaryKeyError) as refused:
        SQLiteChangeSource(database, ["bare"]).install()
    assert str(refused.value) == (
        "table 'bare' has no primary key: CDC keys its change log and rows by it; SQLite cannot "
        "add one to an existing table: create it again with a PRIMARY KEY and a type for 'a', "
        "'c' (and copy its rows over) to capture it"
    )


def test_the_capture_loop_publishes_then_advances_and_stops_on_an_incompatible_change(
    source: SQLiteChangeSource, database: Path, tmp_path: Path
) -> None:
    _run(database, *(f"INSERT INTO users (id, name) VALUES ({i}, 'u{i}')" for i in range(5)))
    log = ParquetChangeLog(tmp_path / "log")
    with stores_at(f"sqlite:///{tmp_path / 'ordo.db'}") as stores:
        capture = Capture(source, Publisher(log, partitions=2), SchemaRegistry(stores.schemas))
        totals = capture.run(until_idle=True)
        assert totals.published == {"users": 5}
        assert source.status().retained_changes == 0
        assert {m.schema_id for m in log.read("users")} == {1}

        _run(database, "ALTER TABLE users ADD COLUMN note TEXT")
        source.schemas()  # triggers follow the new column (writes before this would miss it)
        _run(database, "INSERT INTO users (id, name, note) VALUES (9, 'n', 'hi')")
        capture.run(until_idle=True)
        newest = [m for m in log.read("users") if m.partition_key == (9,)]
        assert newest[0].cells["note"].value == "hi"
        current = SchemaRegistry(stores.schemas).current("users")
        assert (current.version, newest[0].schema_id) == (2, current.schema_id)

        _run(
            database,
            "ALTER TABLE users RENAME COLUMN score TO points",
            "INSERT INTO users (id, name) VALUES (10, 'x')",
        )
        with pytest.raises(IncompatibleSchemaError, match="'score' dropped"):
            capture.run(until_idle=True)
        assert source.status().retained_changes == 1  # nothing advanced


def test_changes_written_before_an_accepted_incompatible_change_name_the_older_schema(
    source: SQLiteChangeSource, database: Path, tmp_path: Path
) -> None:
    """They fit only the version they were written under: named with the newer one, the
    materializer dead-lettered them."""
    _run(database, "INSERT INTO users (id, name) VALUES (1, 'a')")
    log = ParquetChangeLog(tmp_path / "log")
    with stores_at(f"sqlite:///{tmp_path / 'ordo.db'}") as stores:
        registry = SchemaRegistry(stores.schemas)
        capture = Capture(source, Publisher(log, partitions=2), registry)
        capture.run(until_idle=True)
        # SQLite rewrites the triggers' column references, not the names they log the row by.
        _run(
            database,
            "ALTER TABLE users RENAME COLUMN score TO points",
            "INSERT INTO users (id, name, points) VALUES (2, 'b', 1.5)",
        )
        with pytest.raises(IncompatibleSchemaError):
            capture.run(until_idle=True)
        registry.accept("users", 2)
        capture.run(until_idle=True)
        _run(database, "INSERT INTO users (id, name, points) VALUES (3, 'c', 2.5)")
        capture.run(until_idle=True)
        first, second = registry.versions("users")

    logged = {m.partition_key: m for m in log.read("users")}
    assert logged[(2,)].cells["score"].value == 1.5
    assert logged[(3,)].cells["points"].value == 2.5
    assert [logged[(i,)].schema_id for i in (1, 2, 3)] == [
        first.schema_id,
        first.schema_id,
        second.schema_id,
    ]
    for version, key in ((first, (2,)), (second, (3,))):
        assert mutation_problems(logged[key], version.schema) == []


def test_snapshot_rows_name_the_schema_they_were_read_with(
    source: SQLiteChangeSource, database: Path, tmp_path: Path
) -> None:
    _run(database, "INSERT INTO users (id, name) VALUES (1, 'a')")
    log = ParquetChangeLog(tmp_path / "log")
    with stores_at(f"sqlite:///{tmp_path / 'ordo.db'}") as stores:
        registry = SchemaRegistry(stores.schemas)
        Capture(source, Publisher(log, partitions=2), registry).publish_snapshot("users")
        current = registry.current("users")

    [row] = log.read("users")
    assert (row.audit.is_snapshot, row.schema_id) == (True, current.schema_id)


def test_a_capture_reports_its_running_totals_after_each_window_it_publishes(
    source: SQLiteChangeSource, database: Path, tmp_path: Path
) -> None:
    _run(database, *(f"INSERT INTO users (id, name) VALUES ({i}, 'u{i}')" for i in range(5)))
    settings = CaptureSettings(max_changes=2)
    seen: list[tuple[int, int | None]] = []
    with stores_at(f"sqlite:///{tmp_path / 'ordo.db'}") as stores:
        capture = Capture(
            source,
            Publisher(ParquetChangeLog(tmp_path / "log"), partitions=2),
            SchemaRegistry(stores.schemas),
            settings=settings,
        )
        totals = capture.run(
            until_idle=True, on_publish=lambda t: seen.append((t.published["users"], t.up_to))
        )

    assert [published for published, _ in seen] == [2, 4, 5]
    assert seen[-1][1] == totals.up_to


def test_a_partial_window_waits_for_the_flush_interval_and_a_full_one_does_not(
    source: SQLiteChangeSource, database: Path, tmp_path: Path
) -> None:
    clock = ManualClock(0)
    settings = CaptureSettings(max_changes=3, flush_interval=timedelta(seconds=1))
    log = ParquetChangeLog(tmp_path / "log")
    with stores_at(f"sqlite:///{tmp_path / 'ordo.db'}") as stores:
        capture = Capture(
            source, Publisher(log), SchemaRegistry(stores.schemas), settings=settings, clock=clock
        )
        totals = CaptureTotals()
        _run(database, "INSERT INTO users (id, name) VALUES (1, 'a')")
        assert capture.capture_once(totals) is None  # partial, the interval has not passed
        clock.advance(999_000_000)
        assert capture.capture_once(totals) is None
        clock.advance(1_000_000)
        assert capture.capture_once(totals) == PublishedWindow(size=1, has_more=False)
        _run(database, *(f"INSERT INTO users (id, name) VALUES ({i}, 'b')" for i in range(2, 5)))
        # a full window goes at once (the limit reached: the source may hold more)
        assert capture.capture_once(totals) == PublishedWindow(size=3, has_more=True)
    assert totals.published == {"users": 4}
    assert source.status().retained_changes == 0


def test_an_infinite_real_is_captured_as_a_string_that_no_numeric_column_accepts(
    source: SQLiteChangeSource, database: Path
) -> None:
    """JSON has no infinities: SQLite's json_object() writes `Inf` (or 9.0e999) for one.

    As the strings "Infinity" and "-Infinity" the change log stays JSON, and the materializer
    dead-letters the change naming the column instead of failing to read it.
    """
    _run(
        database,
        "INSERT INTO users VALUES (1, 'ada', 1, NULL, 9e999)",
        "INSERT INTO orders VALUES ('a', 1, -9e999)",  # an INTEGER column holds a REAL too
    )
    rows = source.peek(max_changes=10).rows
    for text in rows.column("cell_values"):
        json.loads(text, parse_constant=pytest.fail)  # standard JSON
    users, orders = rows.mutations()
    assert users.cells["score"].value == "Infinity"
    assert orders.cells["qty"].value == "-Infinity"
    by_table = {s.table: s for s in source.schemas()}
    assert mutation_problems(users, by_table["users"]) == [
        "column 'score': 'Infinity' is not a double"
    ]
    assert mutation_problems(orders, by_table["orders"]) == [
        "column 'qty': '-Infinity' is not a long"
    ]
    (snapshot,) = source.snapshot("users")
    assert snapshot.cells["score"].value == "Infinity"


def test_reals_are_captured_as_the_application_reads_them_back(tmp_path: Path) -> None:
    """SQLite 3.40 writes a REAL with 15 significant digits: 0.1 + 0.2 was captured as 0.3, and
    the largest double as 1.79769313486232e+308, beyond a double's range (an unreadable
    mutation; in a key, a stopped capture)."""
    reals = [0.1 + 0.2, sys.float_info.max, -sys.float_info.max, 5e-324, 1 / 3, 0.1, 1e22, 2.5]
    path = tmp_path / "reals.db"
    _run(path, "CREATE TABLE reals (k REAL PRIMARY KEY, r REAL, d DECIMAL, j JSON)")
    source = SQLiteChangeSource(path, ["reals"])
    source.install()
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.executemany("INSERT INTO reals VALUES (?, ?, ?, ?)", [(x,) * 4 for x in reals])
        read_back = conn.execute("SELECT k, r, d, j FROM reals ORDER BY rowid").fetchall()
    assert read_back == [(x,) * 4 for x in reals]  # a JSON or DECIMAL column keeps the REAL

    rows = source.peek(max_changes=100).rows
    snapshot = list(source.snapshot("reals"))
    source.close()

    for text in rows.column("cell_values"):
        parse_json(text)
    for captured in (rows.mutations(), snapshot):
        assert [m.partition_key for m in captured] == [(x,) for x in reals]
        values = [{n: c.value for n, c in m.cells.items()} for m in captured]
        assert [(v["r"], v["j"], float(str(v["d"]))) for v in values] == [(x,) * 3 for x in reals]


def test_a_key_that_is_not_json_stops_the_capture_naming_the_change(
    source: SQLiteChangeSource, database: Path
) -> None:
    """A change an earlier ordo's triggers wrote with an infinite key (`[Inf]`)."""
    _run(
        database,
        "INSERT INTO ordo_cdc_changes (table_name, op, key_json, row_json, captured_at_us) "
        "VALUES ('users', 'D', '[Inf]', NULL, 0)",
    )
    with pytest.raises(CaptureError, match=r"^table 'users': change 1 of ordo_cdc_changes has "):
        source.peek(max_changes=10)


@pytest.fixture
def documents(tmp_path: Path) -> Iterator[SQLiteChangeSource]:
    path = tmp_path / "docs.db"
    _run(path, "CREATE TABLE docs (id INTEGER PRIMARY KEY, body JSON, tags JSON)")
    opened = SQLiteChangeSource(path, ["docs"])
    opened.install()
    yield opened
    opened.close()


def test_a_json_column_holding_text_that_is_not_json_is_captured_and_dead_lettered(
    documents: SQLiteChangeSource,
) -> None:
    """json() raised "malformed JSON" inside the trigger, which failed the application's write.

    The value is captured under a name that is no column, so the materializer dead-letters the
    change saying which column holds what, instead of the source losing its write.
    """
    _run(
        documents.path,
        """INSERT INTO docs VALUES (1, '{"a": [1, 2]}', '["x"]')""",
        "INSERT INTO docs VALUES (2, '{oops', NULL)",
        "UPDATE docs SET tags = 'not json' WHERE id = 1",
        "INSERT INTO docs VALUES (3, x'00ff', 9e999)",
    )
    rows = documents.peek(max_changes=10).rows
    for text in rows.column("cell_values"):
        json.loads(text, parse_constant=pytest.fail)  # standard JSON
    valid, malformed, updated, odd = rows.mutations()
    assert {n: c.value for n, c in valid.cells.items()} == {"body": {"a": [1, 2]}, "tags": ["x"]}
    assert {n: c.value for n, c in malformed.cells.items()} == {
        "body (not JSON)": "{oops",
        "tags": None,
    }
    assert {n: c.value for n, c in odd.cells.items()} == {
        "body (not JSON)": "x'00ff'",
        "tags (not JSON)": "Infinity",
    }
    (schema,) = documents.schemas()
    folded = materialize_partition(
        PartitionState(), [malformed], lambda _: ResolvedSchema(schema_id=7, schema=schema)
    )
    assert [r.reason for r in folded.rejected] == [
        "does not fit schema id 7: column 'body': '{oops' is not JSON text"
    ]
    assert folded.messages == []
    assert mutation_problems(updated, schema) == ["column 'tags': 'not json' is not JSON text"]
    assert mutation_problems(odd, schema) == [
        "column 'body': \"x'00ff'\" is not JSON text",
        "column 'tags': 'Infinity' is not JSON text",
    ]
    assert mutation_problems(valid, schema) == []
    snapshot = {m.partition_key: m for m in documents.snapshot("docs")}
    assert snapshot[(1,)].cells["tags (not JSON)"].value == "not json"


def test_json_holding_a_number_beyond_a_double_is_captured_and_dead_lettered(
    documents: SQLiteChangeSource,
) -> None:
    """json_valid() accepts `1e999`, which Python reads as an infinity: the change log held it,
    the materializer dead-lettered the change as an unreadable mutation naming no column, and
    the snapshot failed. It is set aside as text that is not JSON is; the rest is carried."""
    long_float = f"{10**309}.5"  # no exponent: the triggers look for such numbers in long text
    _run(
        documents.path,
        """INSERT INTO docs VALUES (1, '{"a": [1, 1e999]}', '[1e308, 12345678901234567890123]')""",
        """INSERT INTO docs VALUES (2, '{"a": 1}', '[-1.5E+400]')""",
        f"INSERT INTO docs VALUES (3, '[{long_float}]', '[{10**309}]')",
    )
    rows = documents.peek(max_changes=10).rows
    for text in rows.column("cell_values"):
        parse_json(text)  # standard JSON, every number within a double's range
    beyond, negative, long = rows.mutations()
    assert {n: c.value for n, c in beyond.cells.items()} == {
        "body (not JSON)": '{"a": [1, 1e999]}',
        "tags": [1e308, 12345678901234567890123],  # a long integer is exact
    }
    assert {n: c.value for n, c in negative.cells.items()} == {
        "body": {"a": 1},
        "tags (not JSON)": "[-1.5E+400]",
    }
    (schema,) = documents.schemas()
    folded = materialize_partition(
        PartitionState(), [beyond], lambda _: ResolvedSchema(schema_id=7, schema=schema)
    )
    assert [r.reason for r in folded.rejected] == [
        "does not fit schema id 7: column 'body': '{\"a\": [1, 1e999]}' is JSON that cannot be "
        "carried: number 1e999 is out of the range of a double"
    ]
    assert {n: c.value for n, c in long.cells.items()} == {
        "body (not JSON)": f"[{long_float}]",
        "tags": [10**309],
    }
    assert mutation_problems(negative, schema) == [
        "column 'tags': '[-1.5E+400]' is JSON that cannot be carried: number -1.5E+400 is out of "
        "the range of a double"
    ]
    snapshot = {m.partition_key: m for m in documents.snapshot("docs")}
    assert {n: c.value for n, c in snapshot[(1,)].cells.items()} == {
        n: c.value for n, c in beyond.cells.items()
    }


def _captured(path: Path, table: str, ddl: str, *writes: str) -> tuple[list[Mutation], TableSchema]:
    """Create `table`, capture it, run the application's `writes`: their changes and schema."""
    _run(path, ddl)
    source = SQLiteChangeSource(path, [table])
    try:
        source.install()
        _run(path, *writes)
        (schema,) = source.schemas()
        return source.peek(max_changes=100).rows.mutations(), schema
    finally:
        source.close()


def test_a_json_key_that_is_not_json_is_captured_as_a_null_key(tmp_path: Path) -> None:
    """A key has no name to carry its value aside: the change is captured with a null key,
    which the materializer dead-letters, instead of failing the application's write."""
    (valid, malformed, beyond), schema = _captured(
        tmp_path / "keyed.db",
        "keyed",
        "CREATE TABLE keyed (k JSON PRIMARY KEY, n INTEGER)",
        """INSERT INTO keyed VALUES ('{"a": 1}', 1)""",
        "INSERT INTO keyed VALUES ('{oops', 2)",
        "INSERT INTO keyed VALUES ('[1e999]', 3)",  # stopped the capture: a key it cannot read
    )
    assert valid.partition_key == ({"a": 1},)
    assert malformed.partition_key == beyond.partition_key == (None,)
    assert mutation_problems(malformed, schema) == ["key column 'k': None is not a json"]


def test_a_blob_in_a_column_of_another_type_is_captured_and_dead_lettered(
    tmp_path: Path,
) -> None:
    """SQLite lets any column hold a BLOB; json_object() and json_array() refuse one, which
    failed the application's write. It is captured aside (a key as null) and dead-lettered."""
    (inserted, updated, blob_key), schema = _captured(
        tmp_path / "notes.db",
        "notes",
        "CREATE TABLE notes (k TEXT PRIMARY KEY, title TEXT, n INTEGER, due DATE)",
        "INSERT INTO notes VALUES ('a', x'6869', 1, '2026-11-22')",
        "UPDATE notes SET n = x'00', title = 'hi' WHERE k = 'a'",
        "INSERT INTO notes VALUES (x'01', 'key', 2, NULL)",
    )
    assert {n: c.value for n, c in inserted.cells.items()} == {
        "title (not JSON)": "x'6869'",
        "n": 1,
        "due": "2026-11-22",
    }
    assert mutation_problems(inserted, schema) == [
        "column 'title': \"x'6869'\" is a BLOB, which a string column cannot hold"
    ]
    assert mutation_problems(updated, schema) == [
        "column 'n': \"x'00'\" is a BLOB, which a long column cannot hold"
    ]
    assert blob_key.partition_key == (None,)
    assert mutation_problems(blob_key, schema) == ["key column 'k': None is not a string"]


def test_an_infinite_real_in_a_string_column_is_carried_as_the_application_reads_it_back(
    tmp_path: Path,
) -> None:
    """A TEXT column stores 9e999 as the text 'Inf', which is carried as it is. A column read
    as a string without TEXT affinity (UUID) keeps the REAL, which the string "Infinity" fitted,
    a value the application never reads: it is set aside and dead-lettered (a key as null)."""
    path = tmp_path / "tokens.db"
    (inserted, keyed), schema = _captured(
        path,
        "tokens",
        "CREATE TABLE tokens (k UUID PRIMARY KEY, label TEXT, u UUID)",
        "INSERT INTO tokens VALUES ('a', 9e999, -9e999)",
        "INSERT INTO tokens VALUES (9e999, 'b', 'c')",
    )
    with closing(sqlite3.connect(path)) as conn:
        read_back = conn.execute("SELECT label, u FROM tokens WHERE k = 'a'").fetchone()
    assert read_back == ("Inf", -math.inf)
    assert {n: c.value for n, c in inserted.cells.items()} == {
        "label": "Inf",
        "u (not JSON)": "-Infinity",
    }
    assert mutation_problems(inserted, schema) == [
        "column 'u': '-Infinity' is an infinite REAL, which a string column cannot hold"
    ]
    assert keyed.partition_key == (None,)
    assert mutation_problems(keyed, schema) == ["key column 'k': None is not a string"]


def test_triggers_an_earlier_ordo_installed_are_replaced_by_the_next_capture_window(
    documents: SQLiteChangeSource,
) -> None:
    """Their json() fails the application's write of text that is not JSON until replaced."""
    earlier = (
        'CREATE TRIGGER "ordo_cdc_docs_insert" AFTER INSERT ON "docs" BEGIN INSERT INTO '
        "ordo_cdc_changes (table_name, op, key_json, old_key_json, row_json, captured_at_us) "
        "VALUES ('docs', 'I', json_array(NEW.\"id\"), NULL, json_object('body', "
        'json(NEW."body"), \'tags\', json(NEW."tags")), 0); END'
    )
    _run(documents.path, 'DROP TRIGGER "ordo_cdc_docs_insert"', earlier)
    with pytest.raises(sqlite3.OperationalError, match="malformed JSON"):
        _run(documents.path, "INSERT INTO docs VALUES (1, '{oops', NULL)")

    documents.schemas()  # what every capture window does first

    _run(documents.path, "INSERT INTO docs VALUES (1, '{oops', NULL)")
    (captured,) = documents.peek(max_changes=10).rows.mutations()
    assert captured.cells["body (not JSON)"].value == "{oops"
