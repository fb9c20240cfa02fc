"""SQLite capture of key columns by their declared type: rows SQLite tells apart keep keys of
their own, from the snapshot through every change of the row.

SQLite compares keys by storage class first: the integer 1, the text '1' and the BLOB x'31' are
three keys, while 1 and 1.0 are one. A column's affinity converts some values on the way in
(NUMERIC turns '1.0' into 1, REAL turns 1 into 1.0), and any column may hold a value of any
other class.
"""

from __future__ import annotations

import math
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import TypeAlias

import pytest

from ordo.cdc.change import mutation_problems
from ordo.cdc.mutation import Key, Mutation
from ordo.cdc.schema import TableSchema
from ordo.storage.sqlite.change_source import SQLiteChangeSource
from sqlite_support import run_sql

Stored: TypeAlias = int | float | str | bytes


def _written_and_snapshot(
    path: Path, declared: str, keys: list[Stored]
) -> tuple[list[Mutation], list[Key], TableSchema]:
    """Capture `t (k <declared> PRIMARY KEY, n)` while each of `keys` is inserted (n is its
    index), updated and deleted: the changes in that order, the snapshot's keys (taken after
    the inserts) in `n` order, and the schema."""
    run_sql(path, f"CREATE TABLE t (k {declared} PRIMARY KEY, n INTEGER)")
    source = SQLiteChangeSource(path, ["t"])
    try:
        source.install()
        with closing(sqlite3.connect(path)) as conn, conn:
            conn.executemany("INSERT INTO t VALUES (?, ?)", [(k, n) for n, k in enumerate(keys)])
        by_n = {m.cells["n"].value: m.partition_key for m in source.snapshot("t")}
        with closing(sqlite3.connect(path)) as conn, conn:
            conn.execute("UPDATE t SET n = n + 100")  # rowid order: the order of the inserts
            conn.executemany("DELETE FROM t WHERE n = ?", [(n + 100,) for n in range(len(keys))])
        (schema,) = source.schemas()
        changes = source.peek(max_changes=1000).rows.mutations()
        return changes, [by_n[n] for n in range(len(keys))], schema
    finally:
        source.close()


@pytest.mark.parametrize(
    ("declared", "keys"),
    [
        pytest.param("INT", [1, 1.5, "abc", 2**63 - 1, "9223372036854775808", "0x10"], id="int"),
        pytest.param("REAL", [-0.0, 1, 2.5, 0.1 + 0.2, 0.3, 1e300, "x"], id="real"),
        pytest.param(
            "NUMERIC",
            [1, 1.5, 0.1 + 0.2, 0.3, 1e-20, 2e-20, 2**62 + 1, "9223372036854775808", "1_000"],
            id="numeric",
        ),
        pytest.param("DECIMAL(10, 2)", ["abc", 1000, 1e20, -0.0, "Infinity"], id="decimal"),
        pytest.param(
            "DATETIME",
            ["2026-01-01 00:00:00", "2026-01-01T00:00:00", "2026-01-01T00:00:00+00:00", 20260101],
            id="datetime",
        ),
        pytest.param("BOOLEAN", [0, 1, 2, -1, 0.5, "yes", "true", ""], id="boolean"),
        pytest.param("TEXT", [1, "01", 1.5, "true", ""], id="text"),
        pytest.param("BLOB", [b"1", b"", b"\x00", b"ab"], id="blob"),
    ],
)
def test_rows_sqlite_tells_apart_have_keys_of_their_own_that_every_change_repeats(
    tmp_path: Path, declared: str, keys: list[Stored]
) -> None:
    """A BOOLEAN key rendered by truth made 1 and 2 (and 0 and 'yes') one key, so the
    materialized table held one row for both, and deleting either deleted it."""
    changes, snapshot, _ = _written_and_snapshot(tmp_path / "app.db", declared, keys)
    inserted = [m.partition_key for m in changes[: len(keys)]]
    assert len(set(inserted)) == len(keys)
    assert [m.partition_key for m in changes] == inserted * 3  # inserts, updates, deletes
    assert snapshot == inserted


def test_a_boolean_key_is_true_or_false_for_1_and_0_and_anything_else_is_dead_lettered(
    tmp_path: Path,
) -> None:
    """BOOLEAN has NUMERIC affinity: it holds 2, 0.5 or 'yes' as they are, each its own key.
    Read as a truth value they were the keys of the rows 1 or 0; as they are, no boolean
    column accepts them, and the materializer dead-letters their changes saying so."""
    keys: list[Stored] = [2, 0.5, "yes", 0, 1]
    changes, _, schema = _written_and_snapshot(tmp_path / "app.db", "BOOLEAN", keys)
    keyed = {m.partition_key: mutation_problems(m, schema) for m in changes}
    assert keyed == {
        (2,): ["key column 'k': 2 is not a boolean"],
        (0.5,): ["key column 'k': 0.5 is not a boolean"],
        ("yes",): ["key column 'k': 'yes' is not a boolean"],
        (False,): [],
        (True,): [],
    }


def test_a_blob_key_is_keyed_by_blobs_and_a_text_or_number_in_it_is_dead_lettered(
    tmp_path: Path,
) -> None:
    """A BLOB column stores the text '1', the integer 1 and the BLOB x'31' as they are, three
    keys; as the hex of their bytes they were one, and a change of the text or the number
    changed the BLOB's row. Bytes cannot tell them apart: anything but a BLOB is keyed as null
    (as a BLOB in a key of another type is), and the materializer dead-letters it."""
    keys: list[Stored] = [b"1", "1", 1, 1.5, b"ab", "ab", math.pi]
    changes, snapshot, schema = _written_and_snapshot(tmp_path / "app.db", "BLOB", keys)
    assert snapshot == [("31",), (None,), (None,), (None,), ("6162",), (None,), (None,)]
    assert [m.partition_key for m in changes[: len(keys)]] == snapshot
    assert {tuple(mutation_problems(m, schema)) for m in changes} == {
        (),
        ("key column 'k': None is not a bytes",),
    }
    assert [mutation_problems(m, schema) for m in changes if m.partition_key[0] is not None] == [
        []
    ] * 6


def test_a_numeric_key_holding_text_that_is_no_decimal_number_is_dead_lettered(
    tmp_path: Path,
) -> None:
    """NUMERIC affinity stores '1.0' and '1e3' as numbers, and keeps '1_000' as text: a row
    apart from 1000. Python's Decimal() read it as 1000, so it was materialized: a PostgreSQL
    sink refused it, failing the batch."""
    keys: list[Stored] = [1000, "1_000", "\uff11", "abc", 1.5, 1e-20]
    changes, _, schema = _written_and_snapshot(tmp_path / "app.db", "NUMERIC", keys)
    assert {m.partition_key: mutation_problems(m, schema) for m in changes} == {
        ("1000",): [],
        ("1_000",): ["key column 'k': '1_000' is not a decimal"],
        ("\uff11",): ["key column 'k': '\uff11' is not a decimal"],
        ("abc",): ["key column 'k': 'abc' is not a decimal"],
        ("1.5",): [],
        ("1.0e-20",): [],
    }
