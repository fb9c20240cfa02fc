"""SQLite capture by triggers of values SQLite holds and JSON cannot: infinite and exact reals,
text that is not JSON in a JSON column, numbers beyond a double, BLOBs in any column, and the
triggers of an earlier ordo that refused such writes.
"""

from __future__ import annotations

import json
import math
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from ordo.cdc.change import mutation_problems
from ordo.cdc.json_text import parse_json
from ordo.cdc.materializer import materialize_partition
from ordo.cdc.mutation import Mutation
from ordo.cdc.row_state import PartitionState
from ordo.cdc.schema import TableSchema
from ordo.cdc.schema_catalog import ResolvedSchema
from ordo.errors import CaptureError
from ordo.storage.sqlite.change_source import SQLiteChangeSource
from sqlite_support import run_sql


def test_an_infinite_real_is_captured_as_a_string_that_no_numeric_column_accepts(
    source: SQLiteChangeSource, database: Path
) -> None:
    """JSON has no infinities: SQLite's json_object() writes `Inf` (or 9.0e999) for one.

    As the strings "Infinity" and "-Infinity" the change log stays JSON, and the materializer
    dead-letters the change naming the column instead of failing to read it.
    """
    run_sql(
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
    run_sql(path, "CREATE TABLE reals (k REAL PRIMARY KEY, r REAL, d DECIMAL, j JSON)")
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
    run_sql(
        database,
        "INSERT INTO ordo_cdc_changes (table_name, op, key_json, row_json, captured_at_us) "
        "VALUES ('users', 'D', '[Inf]', NULL, 0)",
    )
    with pytest.raises(CaptureError, match=r"^table 'users': change 1 of ordo_cdc_changes has "):
        source.peek(max_changes=10)


@pytest.fixture
def documents(tmp_path: Path) -> Iterator[SQLiteChangeSource]:
    path = tmp_path / "docs.db"
    run_sql(path, "CREATE TABLE docs (id INTEGER PRIMARY KEY, body JSON, tags JSON)")
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
    run_sql(
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
    run_sql(
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


def test_json_numbers_a_double_would_round_are_captured_and_dead_lettered(
    documents: SQLiteChangeSource,
) -> None:
    """SQLite's JSON keeps a number's digits, which the change log held as written: the
    materializer read `0.10000000000000000001` as 0.1 and `1e-400` as 0.0, so messages and
    sinks held values the application never wrote, without a word. Such a document is set
    aside as one beyond a double's range is; one a double holds as written is carried, and so
    is a REAL the column stores (SQLite rounded it itself: the application reads that double)."""
    run_sql(
        documents.path,
        """INSERT INTO docs VALUES (1, '{"b": 0.10000000000000000001}', '[0.1, 1E+2, 1.50]')""",
        """INSERT INTO docs VALUES (2, 0.1 + 0.2, '{"c": [1e-400]}')""",
        f"INSERT INTO docs VALUES (3, NULL, '[{'1' * 5000}]')",
    )
    rounded, tiny, long = documents.peek(max_changes=10).rows.mutations()
    assert {n: c.value for n, c in long.cells.items()} == {
        "body": None,
        "tags (not JSON)": f"[{'1' * 5000}]",
    }
    assert {n: c.value for n, c in rounded.cells.items()} == {
        "body (not JSON)": '{"b":0.10000000000000000001}',
        "tags": [0.1, 100.0, 1.5],
    }
    assert {n: c.value for n, c in tiny.cells.items()} == {
        "body": 0.30000000000000004,
        "tags (not JSON)": '{"c":[1e-400]}',
    }
    (schema,) = documents.schemas()
    folded = materialize_partition(
        PartitionState(), [rounded, tiny], lambda _: ResolvedSchema(schema_id=7, schema=schema)
    )
    assert [r.reason for r in folded.rejected] == [
        "does not fit schema id 7: column 'body': '{\"b\":0.10000000000000000001}' is JSON "
        "that cannot be carried: number 0.10000000000000000001 is rounded to 0.1 "
        "as a double",
        "does not fit schema id 7: column 'tags': '{\"c\":[1e-400]}' is JSON that cannot be "
        "carried: number 1e-400 is rounded to 0.0 as a double",
    ]
    snapshot = [{n: c.value for n, c in m.cells.items()} for m in documents.snapshot("docs")]
    assert snapshot == [{n: c.value for n, c in m.cells.items()} for m in (rounded, tiny, long)]


def _captured(path: Path, table: str, ddl: str, *writes: str) -> tuple[list[Mutation], TableSchema]:
    """Create `table`, capture it, run the application's `writes`: their changes and schema."""
    run_sql(path, ddl)
    source = SQLiteChangeSource(path, [table])
    try:
        source.install()
        run_sql(path, *writes)
        (schema,) = source.schemas()
        return source.peek(max_changes=100).rows.mutations(), schema
    finally:
        source.close()


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


def test_text_and_json_holding_a_nul_character_are_dead_lettered_naming_the_column(
    tmp_path: Path,
) -> None:
    """SQLite keeps a NUL in text (`char(0)`) and JSON's `\\u0000`, and the capture carries
    both as written; no sink stores the character (PostgreSQL's text and jsonb refuse it), so
    such a change failed a PostgreSQL sink's whole batch. Its change is dead-lettered instead,
    key or not; a NUL-free string of any other character fits."""
    changes, schema = _captured(
        tmp_path / "notes.db",
        "notes",
        "CREATE TABLE notes (k TEXT PRIMARY KEY, title TEXT, doc JSON)",
        "INSERT INTO notes VALUES ('a', 'x' || char(0) || 'y', NULL)",
        """INSERT INTO notes VALUES ('b', 'ok', '{"list": [1, "\\u0000"]}')""",
        "INSERT INTO notes VALUES ('c' || char(0), 'ok', NULL)",
        "INSERT INTO notes VALUES ('d', char(1, 128512) || '', '[]')",
    )
    assert [mutation_problems(m, schema) for m in changes] == [
        ["column 'title': 'x\\x00y' holds a NUL character, which no sink stores"],
        ["column 'doc': {'list': [1, '\\x00']} holds a NUL character, which no sink stores"],
        ["key column 'k': 'c\\x00' holds a NUL character, which no sink stores"],
        [],
    ]
    assert changes[3].cells["title"].value == "\x01\U0001f600"


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


def test_an_integer_columns_number_beyond_64_bits_is_a_real_captured_as_a_double(
    tmp_path: Path,
) -> None:
    """SQLite's integers are 64 bits: an INTEGER column stores a larger number, written as an
    integer's text or as a REAL, as a REAL. The triggers carry it with a fraction or exponent,
    so it is read as a double, never as an integer beyond 64 bits (which a long column's sink
    cannot write): no long accepts it, and the change is dead-lettered, a key's as a value's."""
    beyond = ["'9223372036854775808'", "'-9223372036854775809'", str(10**30), "1e30", "2e300"]
    changes, schema = _captured(
        tmp_path / "wide.db",
        "wide",
        "CREATE TABLE wide (k INT PRIMARY KEY, n INTEGER)",
        f"INSERT INTO wide VALUES ({2**63 - 1}, {-(2**63)})",
        *(f"INSERT INTO wide VALUES ({n}, {literal})" for n, literal in enumerate(beyond)),
        *(f"INSERT INTO wide VALUES ({literal}, 1)" for literal in beyond[:3]),
    )
    extremes, *values = changes[: 1 + len(beyond)]
    assert (extremes.partition_key, extremes.cells["n"].value) == ((2**63 - 1,), -(2**63))
    assert mutation_problems(extremes, schema) == []
    for change in values:
        value = change.cells["n"].value
        assert isinstance(value, float)
        assert mutation_problems(change, schema) == [f"column 'n': {value!r} is not a long"]
    for change in changes[1 + len(beyond) :]:
        (key,) = change.partition_key
        assert isinstance(key, float)
        assert mutation_problems(change, schema) == [f"key column 'k': {key!r} is not a long"]


def test_a_boolean_value_is_true_or_false_for_1_and_0_and_anything_else_is_dead_lettered(
    tmp_path: Path,
) -> None:
    """A BOOLEAN column holds 2, 0.5 or 'yes' as they are. Rendered by their truth they were
    captured as true or false ('true' and 'yes' as false: SQLite reads text as its leading
    number), values the application never wrote; as they are, no boolean column accepts them
    and the materializer dead-letters the change saying so."""
    stored = ["0", "1", "'1'", "1.0", "NULL", "2", "-1", "0.5", "'true'", "'yes'", "''", "9e999"]
    changes, schema = _captured(
        tmp_path / "flags.db",
        "flags",
        "CREATE TABLE flags (k INTEGER PRIMARY KEY, b BOOLEAN)",
        *(f"INSERT INTO flags VALUES ({k}, {literal})" for k, literal in enumerate(stored)),
    )
    captured = {m.partition_key[0]: m.cells["b"].value for m in changes}
    assert captured == dict(
        enumerate([False, True, True, True, None, 2, -1, 0.5, "true", "yes", "", "Infinity"])
    )
    problems = {m.partition_key[0]: mutation_problems(m, schema) for m in changes}
    assert problems == {k: [] for k in range(5)} | {
        k: [f"column 'b': {captured[k]!r} is not a boolean"] for k in range(5, len(stored))
    }


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
    run_sql(documents.path, 'DROP TRIGGER "ordo_cdc_docs_insert"', earlier)
    with pytest.raises(sqlite3.OperationalError, match="malformed JSON"):
        run_sql(documents.path, "INSERT INTO docs VALUES (1, '{oops', NULL)")

    documents.schemas()  # what every capture window does first

    run_sql(documents.path, "INSERT INTO docs VALUES (1, '{oops', NULL)")
    (captured,) = documents.peek(max_changes=10).rows.mutations()
    assert captured.cells["body (not JSON)"].value == "{oops"
