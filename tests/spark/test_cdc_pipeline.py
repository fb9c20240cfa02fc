"""CDC end to end: PostgreSQL capture with restarts -> change log -> materializer with restarts,
and the replica simulation (G6) with 3 replicas."""

from __future__ import annotations

import json
import math
import secrets
import sqlite3
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import closing
from itertools import pairwise
from pathlib import Path

import psycopg
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from ordo.cdc import (
    ChangeMessage,
    ChangeOp,
    Column,
    ColumnType,
    JsonValue,
    Key,
    Publisher,
    SchemaRegistry,
    TableSchema,
)
from ordo.cdc.capture import Capture
from ordo.cdc.ingest import ingest, parse_mutation_lines
from ordo.errors import IncompatibleSchemaError
from ordo.simulation.cdc import ReplicaWorkload, check
from ordo.spark.cdc_simulation import run_cdc_simulation
from ordo.spark.materializer import MaterializerSpec, materialize
from ordo.storage.change_sources import DEFAULT_SLOT, change_source_at
from ordo.storage.open import stores_at
from ordo.storage.parquet import ParquetChangeLog
from ordo.storage.postgres.change_source import PostgresChangeSource
from postgres_source_support import fresh_slot

pytestmark = pytest.mark.spark

BIG = secrets.token_hex(60_000)  # 120 kB of incompressible text: TOASTed out of line


def test_the_replica_simulation_with_three_replicas_is_clean(
    spark: SparkSession, tmp_path: Path
) -> None:
    workload = ReplicaWorkload(mutations=3_000, keys=150, replicas=3, seed=11)
    result = run_cdc_simulation(spark, workload, work_dir=tmp_path)
    assert result.report.violations() == {
        "broken_chains": 0,
        "table_not_fold": 0,
        "table_not_lww": 0,
        "nonconforming": 0,
    }
    assert result.deliveries > workload.mutations * 2  # replica duplicates went through
    assert 0 < result.report.messages < result.deliveries
    assert result.report.rows > 0


@pytest.fixture
def slot(postgres_dsn: str) -> Iterator[str]:
    name = fresh_slot()
    yield name
    with PostgresChangeSource(postgres_dsn, slot=name, tables=["accounts"]) as source:
        source.drop()


def _run(dsn: str, *statements: str | tuple[str, Sequence[object]]) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute("SET synchronous_commit = on")  # the test server defers WAL flushes
        for statement in statements:
            query, params = (statement, ()) if isinstance(statement, str) else statement
            conn.execute(query, params)


def _run_sqlite(database: Path, *statements: str) -> None:
    with closing(sqlite3.connect(database)) as conn, conn:
        for statement in statements:
            conn.execute(statement)


def _capture(
    source_url: str, log: Path, *, journal: str, tables: Sequence[str], slot: str = DEFAULT_SLOT
) -> None:
    """One capture run until idle, with a fresh process's objects (a restart each time)."""
    with (
        stores_at(journal) as stores,
        change_source_at(source_url, tables, slot=slot) as source,
    ):
        Capture(source, Publisher(ParquetChangeLog(log)), SchemaRegistry(stores.schemas)).run(
            until_idle=True
        )


def _capture_accounts(dsn: str, slot: str, log: Path) -> None:
    _capture(dsn, log, journal=dsn, tables=["accounts", "notes"], slot=slot)


def _materialize(spark: SparkSession, spec: MaterializerSpec, checkpoint: Path) -> None:
    query = materialize(spark, spec, checkpoint=str(checkpoint), available_now=True)
    query.awaitTermination(180)
    assert query.exception() is None


def _sqlite_materialized(
    spark: SparkSession, tmp_path: Path, sink: str, create: str, *writes: str
) -> tuple[Path, Path, Path, MaterializerSpec]:
    """An SQLite `app.db` whose table `create` makes, captured from then on, after `writes`,
    captured into a change log and materialized into `sink` once. The app database, the change
    log, the checkpoint and the materializer (named as the table)."""
    app, log, checkpoint = tmp_path / "app.db", tmp_path / "log", tmp_path / "checkpoint"
    _run_sqlite(app, create)
    with closing(sqlite3.connect(app)) as conn:
        ((table,),) = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    with change_source_at(str(app), [table]):
        pass  # the triggers exist from here on
    _run_sqlite(app, *writes)
    _capture(str(app), log, journal=sink, tables=[table])
    spec = MaterializerSpec(name=table, table=table, change_log=str(log), sink=sink)
    _materialize(spark, spec, checkpoint)
    return app, log, checkpoint, spec


def _materialized_table(
    url: str, spec: MaterializerSpec
) -> tuple[TableSchema, dict[Key, dict[str, JsonValue]]]:
    """The current schema of the spec's table and its materialized rows by key."""
    with stores_at(url) as stores:
        schema = SchemaRegistry(stores.schemas).current(spec.table).schema
        return schema, stores.change_sink.read_table(spec.target_table, schema)


@pytest.mark.postgres
def test_postgres_changes_become_complete_ordered_messages_across_restarts(
    spark: SparkSession, postgres_dsn: str, slot: str, tmp_path: Path
) -> None:
    _run(
        postgres_dsn,
        "CREATE TABLE accounts (id BIGINT PRIMARY KEY, owner TEXT NOT NULL, balance NUMERIC, "
        "memo TEXT)",
        "CREATE TABLE notes (id BIGINT PRIMARY KEY, body TEXT)",
    )
    log, checkpoint = tmp_path / "log", tmp_path / "checkpoint"
    spec = MaterializerSpec(
        name="accounts", table="accounts", change_log=str(log), sink=postgres_dsn
    )
    with change_source_at(postgres_dsn, ["accounts", "notes"], slot=slot):
        pass  # the slot exists from here on: every later commit is captured
    _run(
        postgres_dsn,
        ("INSERT INTO accounts VALUES (1, 'ada', 10.50, %s)", (BIG,)),
        "INSERT INTO accounts VALUES (2, 'bob', 3, 'short')",
    )
    _run(postgres_dsn, "UPDATE accounts SET balance = 11 WHERE id = 1")  # memo unchanged, TOASTed
    _capture_accounts(postgres_dsn, slot, log)
    _materialize(spark, spec, checkpoint)

    _run(  # one transaction over two tables, a key change and a delete
        postgres_dsn,
        "UPDATE accounts SET balance = balance + 1 WHERE id = 2",
        "INSERT INTO notes VALUES (1, 'moved bob')",
        "UPDATE accounts SET id = 3 WHERE id = 2",
    )
    _run(postgres_dsn, "DELETE FROM accounts WHERE id = 1")
    _run(postgres_dsn, "INSERT INTO accounts VALUES (4, 'cy', 0, NULL)")
    _capture_accounts(postgres_dsn, slot, log)  # a restarted capture
    _materialize(spark, spec, checkpoint)  # a restarted materializer, same checkpoint

    with stores_at(postgres_dsn) as stores:
        registry = SchemaRegistry(stores.schemas)
        schema, versions = registry.current("accounts").schema, registry.versions("accounts")
        messages = list(stores.change_sink.read_messages("accounts"))
        table = stores.change_sink.read_table(spec.target_table, schema)
    by_key: dict[Key, list[ChangeMessage]] = {}
    for message in messages:
        by_key.setdefault(message.key, []).append(message)
    assert [m.op for m in by_key[(1,)]] == [ChangeOp.CREATE, ChangeOp.UPDATE, ChangeOp.DELETE]
    update = by_key[(1,)][1]
    assert update.after is not None
    assert update.after["memo"] == BIG  # the unchanged TOAST value came from the state
    assert update.after["balance"] == "11"
    assert [m.op for m in by_key[(2,)]] == [ChangeOp.CREATE, ChangeOp.UPDATE, ChangeOp.DELETE]
    assert [m.op for m in by_key[(3,)]] == [ChangeOp.CREATE]
    assert [m.op for m in by_key[(4,)]] == [ChangeOp.CREATE]
    for sequence in by_key.values():
        for previous, message in pairwise(sequence):
            assert message.before == previous.after  # G6, per key
        positions = [m.audit.position for m in sequence]
        assert positions == sorted(positions)
    assert sorted(table) == [(3,), (4,)]
    assert table[(3,)]["owner"] == "bob"
    mutations = list(ParquetChangeLog(log).read("accounts"))
    report = check(versions=versions, mutations=mutations, messages=messages, table=table)
    assert report.broken_chains == report.table_not_fold == report.nonconforming == 0
    assert len(mutations) == len({m.audit.position for m in mutations})  # nothing published twice


def test_sqlite_values_json_cannot_carry_are_dead_letters_and_the_rest_is_what_the_app_reads(
    spark: SparkSession, tmp_path: Path
) -> None:
    """No write fails; in the same batch, rows JSON can carry are materialized as the
    application reads them back (a REAL to the last bit, NaN as SQLite's NULL, a TEXT column's
    `Inf`), and the others are dead-lettered naming the column that holds what."""
    app, journal = tmp_path / "app.db", f"sqlite:///{tmp_path / 'ordo.db'}"
    log, checkpoint = tmp_path / "log", tmp_path / "checkpoint"
    columns = "id, label, score, doc, code"
    with closing(sqlite3.connect(app)) as conn, conn:
        conn.execute(
            "CREATE TABLE items (id INTEGER PRIMARY KEY, label TEXT, score REAL, "
            "doc JSON, code UUID)"
        )
    with change_source_at(str(app), ["items"]):
        pass  # the triggers exist from here on
    rows = [
        (1, "ok", 0.1 + 0.2, '{"a": [1, 2.5]}', "u-1"),
        (2, math.inf, 1.5, None, None),  # a TEXT column stores 'Inf'
        (3, "nan", math.nan, None, None),  # SQLite stores NULL
        (4, "max", sys.float_info.max, "[1.7976931348623157e308]", None),
        (5, "inf", math.inf, None, None),
        (6, "-inf", -math.inf, None, None),
        (7, "doc", 1.0, '{"a": 1e999}', None),
        (8, "code", 1.0, None, math.inf),  # UUID: not TEXT affinity, the REAL stays
    ]
    with closing(sqlite3.connect(app)) as conn, conn:
        conn.executemany(f"INSERT INTO items ({columns}) VALUES (?, ?, ?, ?, ?)", rows)
        read_back = conn.execute(f"SELECT {columns} FROM items WHERE id <= 4").fetchall()
    _capture(str(app), log, journal=journal, tables=["items"])
    spec = MaterializerSpec(name="items", table="items", change_log=str(log), sink=journal)
    _materialize(spark, spec, checkpoint)

    schema, table = _materialized_table(journal, spec)
    assert table == {
        (row[0],): dict(zip(schema.names, row, strict=True))
        | {"doc": None if row[3] is None else json.loads(row[3])}
        for row in read_back
    }
    assert table[(2,)]["label"] == "Inf"
    assert table[(3,)]["score"] is None
    dead = pq.read_table(checkpoint / "dead_letters").to_pylist()
    reasons = {d["key_json"]: d["dead_letter_reason"].partition(": ")[2] for d in dead}
    assert reasons == {
        "[5]": "column 'score': 'Infinity' is not a double",
        "[6]": "column 'score': '-Infinity' is not a double",
        "[7]": "column 'doc': '{\"a\": 1e999}' is JSON that cannot be carried: number 1e999 is "
        "out of the range of a double",
        "[8]": "column 'code': 'Infinity' is an infinite REAL, which a string column cannot hold",
    }


def test_a_text_key_holding_json_text_is_materialized_as_the_text_the_application_stored(
    spark: SparkSession, tmp_path: Path
) -> None:
    """SQLite keys a TEXT column by its text: rows whose keys read as the same JSON stay two
    rows, from the snapshot through the triggers' changes (a delete of one of them included)
    to the materialized table."""
    app, journal = tmp_path / "app.db", f"sqlite:///{tmp_path / 'ordo.db'}"
    log, checkpoint = tmp_path / "log", tmp_path / "checkpoint"
    _run_sqlite(
        app,
        "CREATE TABLE docs (k TEXT PRIMARY KEY, n INTEGER)",
        """INSERT INTO docs VALUES ('{"a": 1}', 1), ('{"a":1}', 2), ('[1, 2]', 3), ('x', 4)""",
    )
    with stores_at(journal) as stores, change_source_at(str(app), ["docs"]) as source:
        capture = Capture(source, Publisher(ParquetChangeLog(log)), SchemaRegistry(stores.schemas))
        capture.publish_snapshot("docs")
    _run_sqlite(
        app,
        "UPDATE docs SET n = n + 10",
        "DELETE FROM docs WHERE k = '[1, 2]'",
        """INSERT INTO docs VALUES ('[1,2]', 5), ('"x"', 6)""",
    )
    _capture(str(app), log, journal=journal, tables=["docs"])
    spec = MaterializerSpec(name="docs", table="docs", change_log=str(log), sink=journal)
    _materialize(spark, spec, checkpoint)

    _, table = _materialized_table(journal, spec)
    with closing(sqlite3.connect(app)) as conn:
        rows = conn.execute("SELECT k, n FROM docs").fetchall()
    assert len(rows) == 5
    assert table == {(k,): {"k": k, "n": n} for k, n in rows}


def test_sqlite_keys_stay_the_rows_sqlite_keys_or_are_dead_lettered(
    spark: SparkSession, tmp_path: Path
) -> None:
    """SQLite keys a BOOLEAN column's 1 and 2 (and 0 and 'yes') as two rows, and a BLOB
    column's x'31', '1' and 1 as three. Keyed by truth and by the hex of their bytes they were
    one: the materialized table held one row for them, which an update of the other changed
    and a delete of the other deleted. A boolean key is 1 or 0 and a bytes key a BLOB: the
    others are dead-lettered, and no change of theirs touches the rows materialized."""
    app, journal = tmp_path / "app.db", f"sqlite:///{tmp_path / 'ordo.db'}"
    log = tmp_path / "log"
    _run_sqlite(
        app,
        "CREATE TABLE flags (k BOOLEAN PRIMARY KEY, n INTEGER)",
        "CREATE TABLE blobs (k BLOB PRIMARY KEY, n INTEGER)",
    )
    with change_source_at(str(app), ["flags", "blobs"]):
        pass  # the triggers exist from here on
    _run_sqlite(
        app,
        "INSERT INTO flags VALUES (0, 0), (1, 1), (2, 2), ('yes', 3)",
        "INSERT INTO blobs VALUES (x'31', 0), ('1', 1), (1, 2), (x'6162', 3), ('ab', 4)",
    )
    _run_sqlite(
        app,
        "UPDATE flags SET n = 12 WHERE k = 2",
        "DELETE FROM flags WHERE k = 'yes'",
        "DELETE FROM blobs WHERE k IN ('1', 1)",
        "UPDATE blobs SET n = 14 WHERE k = 'ab'",
    )
    _capture(str(app), log, journal=journal, tables=["flags", "blobs"])
    reasons: dict[str, set[tuple[str, str]]] = {}
    for table in ("flags", "blobs"):
        checkpoint = tmp_path / f"checkpoint-{table}"
        spec = MaterializerSpec(name=table, table=table, change_log=str(log), sink=journal)
        _materialize(spark, spec, checkpoint)
        assert (
            _materialized_table(journal, spec)[1]
            == {
                "flags": {(False,): {"k": False, "n": 0}, (True,): {"k": True, "n": 1}},
                "blobs": {("31",): {"k": "31", "n": 0}, ("6162",): {"k": "6162", "n": 3}},
            }[table]
        )
        dead = pq.read_table(checkpoint / "dead_letters").to_pylist()
        reasons[table] = {(d["key_json"], d["dead_letter_reason"].partition(": ")[2]) for d in dead}
    assert reasons == {
        "flags": {
            ("[2]", "key column 'k': 2 is not a boolean"),
            ('["yes"]', "key column 'k': 'yes' is not a boolean"),
        },
        "blobs": {("[null]", "key column 'k': None is not a bytes")},
    }


@pytest.mark.postgres
def test_a_numeric_key_holding_text_that_is_no_number_is_dead_lettered_not_a_failed_batch(
    spark: SparkSession, postgres_dsn: str, tmp_path: Path
) -> None:
    """SQLite's NUMERIC affinity keeps '1_000' as text, a row apart from 1000. Python's Decimal()
    read it as a decimal, so the PostgreSQL sink got it and refused it, and the materializer
    stopped at that batch whatever else it held."""
    *_, checkpoint, spec = _sqlite_materialized(
        spark,
        tmp_path,
        postgres_dsn,
        "CREATE TABLE amounts (k NUMERIC PRIMARY KEY, n INTEGER)",
        "INSERT INTO amounts VALUES (1000, 0), ('1_000', 1), ('abc', 2), (1.5, 3)",
    )

    assert _materialized_table(postgres_dsn, spec)[1] == {
        ("1000",): {"k": "1000", "n": 0},
        ("1.5",): {"k": "1.5", "n": 3},
    }
    dead = pq.read_table(checkpoint / "dead_letters").to_pylist()
    assert sorted((d["key_json"], d["dead_letter_reason"].partition(": ")[2]) for d in dead) == [
        ('["1_000"]', "key column 'k': '1_000' is not a decimal"),
        ('["abc"]', "key column 'k': 'abc' is not a decimal"),
    ]


@pytest.mark.postgres
def test_sqlite_timestamp_keys_in_several_text_forms_are_rows_of_their_own_in_postgres(
    spark: SparkSession, postgres_dsn: str, tmp_path: Path
) -> None:
    """SQLite compares a TIMESTAMP key as text: one moment written three ways is three rows and
    three keys in the messages. The PostgreSQL sink's TIMESTAMP WITH TIME ZONE key made them
    one row (the last written), and deleting one of them emptied the table (G6)."""
    app, log, checkpoint, spec = _sqlite_materialized(
        spark,
        tmp_path,
        postgres_dsn,
        "CREATE TABLE events (at TIMESTAMP PRIMARY KEY, n INTEGER)",
        "INSERT INTO events VALUES ('2026-01-01 00:00:00', 0), ('2026-01-01T00:00:00', 1)",
        "INSERT INTO events VALUES ('2026-01-01T01:00:00+01:00', 2)",
    )
    assert len(_materialized_table(postgres_dsn, spec)[1]) == 3

    _run_sqlite(app, "DELETE FROM events WHERE at = '2026-01-01T00:00:00'")
    _capture(str(app), log, journal=postgres_dsn, tables=["events"])
    _materialize(spark, spec, checkpoint)

    with closing(sqlite3.connect(app)) as conn:
        rows = conn.execute("SELECT at, n FROM events").fetchall()
    assert len(rows) == 2
    assert _materialized_table(postgres_dsn, spec)[1] == {
        (at,): {"at": at, "n": n} for at, n in rows
    }


def _ingested(log: Path, journal: str, *mutations: Mapping[str, object]) -> None:
    """`mutations` (in the documented JSON form) ingested into `log` as `ordo cdc ingest` does."""
    lines = "\n".join(json.dumps(m) for m in mutations).encode()
    with stores_at(journal) as stores:
        registry = SchemaRegistry(stores.schemas)
        ingest(
            [parse_mutation_lines("in.jsonl", lines)], Publisher(ParquetChangeLog(log)), registry
        )


@pytest.mark.postgres
def test_ingested_decimal_keys_in_several_text_forms_are_rows_of_their_own_in_postgres(
    spark: SparkSession, postgres_dsn: str, tmp_path: Path
) -> None:
    """A decimal key is its text: "1", "1.0" and "1e0" are three keys to the fold and three rows,
    as in an SQLite sink. The PostgreSQL sink's NUMERIC key made them one row, and deleting one
    of them emptied the table."""
    log, checkpoint = tmp_path / "log", tmp_path / "checkpoint"
    columns = (
        Column(name="amount", type=ColumnType.DECIMAL, nullable=False),
        Column(name="n", type=ColumnType.LONG),
    )
    with stores_at(postgres_dsn) as stores:
        schema = TableSchema(table="prices", columns=columns, partition_key=("amount",))
        SchemaRegistry(stores.schemas).register(schema)
    forms = ("1", "1.0", "1e0")
    _ingested(
        log,
        postgres_dsn,
        *(
            {
                "table": "prices",
                "partition_key": [amount],
                "cells": {"n": {"value": n, "write_time": 1}},
                "liveness": {"write_time": 1},
                "audit": {"source": "test", "position": n},
            }
            for n, amount in enumerate(forms)
        ),
    )
    spec = MaterializerSpec(name="prices", table="prices", change_log=str(log), sink=postgres_dsn)
    _materialize(spark, spec, checkpoint)
    assert sorted(_materialized_table(postgres_dsn, spec)[1]) == sorted((a,) for a in forms)

    delete = {"table": "prices", "partition_key": ["1.0"], "row_deleted_at": 2}
    _ingested(log, postgres_dsn, {**delete, "audit": {"source": "test", "position": 3}})
    _materialize(spark, spec, checkpoint)

    assert _materialized_table(postgres_dsn, spec)[1] == {
        ("1",): {"amount": "1", "n": 0},
        ("1e0",): {"amount": "1e0", "n": 2},
    }


def test_ingested_keys_in_several_forms_of_one_row_are_one_row_to_the_fold(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A double 1 and 1.0, bytes "AB" and "\\xab", a decimal 1 and "1": one row of the sink
    (and of an SQLite or PostgreSQL table), and one fold key since ingestion writes each in its
    type's form. As two fold keys, the second write updated the row the first created, and a
    delete naming the row in a third form deleted nothing: the table kept a row the source had
    deleted."""
    log, checkpoint, sink = (
        tmp_path / "log",
        tmp_path / "checkpoint",
        f"sqlite:///{tmp_path / 's.db'}",
    )
    columns = (
        Column(name="d", type=ColumnType.DOUBLE, nullable=False),
        Column(name="b", type=ColumnType.BYTES, nullable=False),
        Column(name="m", type=ColumnType.DECIMAL, nullable=False),
        Column(name="n", type=ColumnType.LONG),
    )
    with stores_at(sink) as stores:
        schema = TableSchema(table="rows", columns=columns, partition_key=("d", "b", "m"))
        SchemaRegistry(stores.schemas).register(schema)
    forms = ([1, "AB", 1], [1.0, "\\xab", "1"])
    _ingested(
        log,
        sink,
        *(
            {
                "table": "rows",
                "partition_key": key,
                "cells": {"n": {"value": n, "write_time": n}},
                "liveness": {"write_time": n},
                "audit": {"source": "test", "position": n},
            }
            for n, key in enumerate(forms, 1)
        ),
    )
    spec = MaterializerSpec(name="rows", table="rows", change_log=str(log), sink=sink)
    _materialize(spark, spec, checkpoint)
    assert _materialized_table(sink, spec)[1] == {
        (1.0, "ab", "1"): {"d": 1.0, "b": "ab", "m": "1", "n": 2}
    }

    delete = {"table": "rows", "partition_key": [1e0, " ab ", 1], "row_deleted_at": 3}
    _ingested(log, sink, {**delete, "audit": {"source": "test", "position": 3}})
    _materialize(spark, spec, checkpoint)

    assert _materialized_table(sink, spec)[1] == {}


def _materialized_key_value_rows(
    spark: SparkSession,
    journal_url: str,
    tmp_path: Path,
    column_type: ColumnType,
    rows: Sequence[tuple[int, int]],
) -> tuple[dict[Key, dict[str, JsonValue]], list[tuple[str, str]]]:
    """`rows` (key `k`, value `x`, both of `column_type`) ingested and materialized.

    The materialized table, and each dead letter's key and reason.
    """
    log, checkpoint = tmp_path / "log", tmp_path / "checkpoint"
    columns = (
        Column(name="k", type=column_type, nullable=False),
        Column(name="x", type=column_type),
    )
    with stores_at(journal_url) as stores:
        schema = TableSchema(table="big", columns=columns, partition_key=("k",))
        SchemaRegistry(stores.schemas).register(schema)
    _ingested(
        log,
        journal_url,
        *(
            {
                "table": "big",
                "partition_key": [k],
                "cells": {"x": {"value": x, "write_time": n}},
                "liveness": {"write_time": n},
                "audit": {"source": "test", "position": n},
            }
            for n, (k, x) in enumerate(rows, 1)
        ),
    )
    spec = MaterializerSpec(name="big", table="big", change_log=str(log), sink=journal_url)
    _materialize(spark, spec, checkpoint)
    dead = pq.read_table(checkpoint / "dead_letters").to_pylist()
    reasons = sorted((d["key_json"], d["dead_letter_reason"].partition(": ")[2]) for d in dead)
    return _materialized_table(journal_url, spec)[1], reasons


def test_an_integer_beyond_a_doubles_range_is_dead_lettered_as_a_double_not_a_failed_batch(
    spark: SparkSession, journal_url: str, tmp_path: Path
) -> None:
    """No double holds 10**400: as a double key or value it passed the schema (any integer did),
    and the sink, which cannot write it to a double column, failed the whole batch. It is
    dead-lettered now, naming the column; 2**53 + 1, which a double rounds, is materialized."""
    rows = [(10**400, 1), (1, 10**400), (2, 2**53 + 1)]
    table, dead = _materialized_key_value_rows(
        spark, journal_url, tmp_path, ColumnType.DOUBLE, rows
    )

    assert table == {(2.0,): {"k": 2.0, "x": 2.0**53}}
    assert dead == [
        ("[1.0]", f"column 'x': {10**400} is not a double"),
        (f"[{10**400}]", f"key column 'k': {10**400} is not a double"),
    ]


def test_an_integer_beyond_64_bits_is_dead_lettered_as_a_long_not_a_failed_batch(
    spark: SparkSession, journal_url: str, tmp_path: Path
) -> None:
    """A long is 64 bits in every sink (SQLite's INTEGER, PostgreSQL's BIGINT, Spark's
    LongType), but any integer passed as one: as a long key or value, 2**63 reached the sink,
    which could not write it, and the whole batch failed. It is dead-lettered now, naming the
    column; the extremes of 64 bits are materialized."""
    rows = [(2**63, 1), (1, -(2**63) - 1), (2**63 - 1, -(2**63))]
    table, dead = _materialized_key_value_rows(spark, journal_url, tmp_path, ColumnType.LONG, rows)

    assert table == {(2**63 - 1,): {"k": 2**63 - 1, "x": -(2**63)}}
    assert dead == [
        ("[1]", f"column 'x': {-(2**63) - 1} is not a long"),
        (f"[{2**63}]", f"key column 'k': {2**63} is not a long"),
    ]


@pytest.mark.postgres
def test_sqlite_values_that_do_not_fit_their_column_dead_letter_their_change_not_the_batch(
    spark: SparkSession, postgres_dsn: str, tmp_path: Path
) -> None:
    """A BOOLEAN column's 2 or 'yes' was captured by its truth, a value the application never
    wrote; a DATE column's week date '2026-W01-1' passed the schema (Python reads it), so the
    PostgreSQL sink refused it and the materializer stopped at that batch; a TIMESTAMP's basic
    format or seventh fraction digit was materialized as Python reads it. Each is now
    dead-lettered with its whole change: the row keeps what its last change that fitted left."""
    *_, checkpoint, spec = _sqlite_materialized(
        spark,
        tmp_path,
        postgres_dsn,
        "CREATE TABLE events (k INTEGER PRIMARY KEY, flag BOOLEAN, day DATE, at TIMESTAMP)",
        "INSERT INTO events VALUES (1, 1, '2026-01-01', '2026-01-01 10:00:00')",
        "INSERT INTO events VALUES (2, 'yes', '2026-01-02', NULL)",
        "INSERT INTO events VALUES (3, 0, '2026-W01-1', NULL)",
        "INSERT INTO events VALUES (4, 0, '2026-01-04', '20260104T1000')",
        "INSERT INTO events VALUES (5, 0, '2026-01-05', '2026-01-05T10:00:00.1234567')",
        "UPDATE events SET flag = 2, day = '2026-02-01' WHERE k = 1",
    )

    assert _materialized_table(postgres_dsn, spec)[1] == {
        (1,): {"k": 1, "flag": True, "day": "2026-01-01", "at": "2026-01-01 10:00:00+00:00"}
    }
    dead = pq.read_table(checkpoint / "dead_letters").to_pylist()
    assert sorted((d["key_json"], d["dead_letter_reason"].partition(": ")[2]) for d in dead) == [
        ("[1]", "column 'flag': 2 is not a boolean"),
        ("[2]", "column 'flag': 'yes' is not a boolean"),
        ("[3]", "column 'day': '2026-W01-1' is not a date"),
        ("[4]", "column 'at': '20260104T1000' is not a timestamp"),
        ("[5]", "column 'at': '2026-01-05T10:00:00.1234567' is not a timestamp"),
    ]


@pytest.mark.postgres
def test_postgres_numbers_json_cannot_carry_are_dead_letters_and_numerics_keep_every_digit(
    spark: SparkSession, postgres_dsn: str, slot: str, tmp_path: Path
) -> None:
    """A numeric of any size reaches the materialized table digit for digit, as does jsonb's
    integer for `1e999`; json keeping `1e999` as written is dead-lettered naming the column,
    and the capture goes on."""
    ddl = "CREATE TABLE docs (id int PRIMARY KEY, body json, tags jsonb, amount numeric)"
    _run(postgres_dsn, ddl)
    with change_source_at(postgres_dsn, ["docs"], slot=slot):
        pass  # the slot exists from here on
    _run(
        postgres_dsn,
        """INSERT INTO docs VALUES (1, '[1]', '[1e999]', 1e400), (2, '[1e999]', '[]', 1)""",
        "INSERT INTO docs VALUES (3, '[]', '[]', 1e5000), (4, '[]', '[]', 0.0000001)",
    )
    log, checkpoint = tmp_path / "log", tmp_path / "checkpoint"
    _capture(postgres_dsn, log, journal=postgres_dsn, tables=["docs"], slot=slot)
    spec = MaterializerSpec(name="docs", table="docs", change_log=str(log), sink=postgres_dsn)
    _materialize(spark, spec, checkpoint)

    _, table = _materialized_table(postgres_dsn, spec)
    assert {key: (row["body"], row["tags"]) for key, row in table.items()} == {
        (1,): ([1], [10**999]),
        (3,): ([], []),
        (4,): ([], []),
    }
    with psycopg.connect(postgres_dsn) as conn:
        amounts = conn.execute(f"SELECT id, amount::text FROM {spec.target_table} ORDER BY id")
        assert amounts.fetchall() == [(1, str(10**400)), (3, "1" + "0" * 5000), (4, "0.0000001")]
    [dead] = pq.read_table(checkpoint / "dead_letters").to_pylist()
    assert dead["key_json"] == "[2]"
    assert dead["dead_letter_reason"].endswith(
        "column 'body': '[1e999]' is JSON that cannot be carried: number 1e999 is out of the "
        "range of a double"
    )


@pytest.mark.postgres
def test_json_holding_a_nul_character_is_dead_lettered_not_a_failed_batch(
    spark: SparkSession, postgres_dsn: str, slot: str, tmp_path: Path
) -> None:
    """PostgreSQL's json keeps `\\u0000` as written, and no sink stores the character it stands
    for (PostgreSQL's jsonb and text refuse it): the PostgreSQL sink failed the whole batch, at
    every restart, so nothing after the change was ever materialized. It is dead-lettered now,
    naming the column, and the other rows of the batch are materialized."""
    _run(postgres_dsn, "CREATE TABLE docs (id int PRIMARY KEY, body json)")
    with change_source_at(postgres_dsn, ["docs"], slot=slot):
        pass  # the slot exists from here on
    _run(
        postgres_dsn,
        """INSERT INTO docs VALUES (1, '{"a": "x\\u0000y"}'), (2, '{"\\u0000": 1}')""",
        """INSERT INTO docs VALUES (3, '["ok", {"b": "\\u0001"}]')""",
    )
    log, checkpoint = tmp_path / "log", tmp_path / "checkpoint"
    _capture(postgres_dsn, log, journal=postgres_dsn, tables=["docs"], slot=slot)
    spec = MaterializerSpec(name="docs", table="docs", change_log=str(log), sink=postgres_dsn)
    _materialize(spark, spec, checkpoint)

    _, table = _materialized_table(postgres_dsn, spec)
    assert table == {(3,): {"id": 3, "body": ["ok", {"b": "\x01"}]}}
    dead = pq.read_table(checkpoint / "dead_letters").to_pylist()
    assert sorted((d["key_json"], d["dead_letter_reason"].partition(": ")[2]) for d in dead) == [
        ("[1]", "column 'body': {'a': 'x\\x00y'} holds a NUL character, which no sink stores"),
        ("[2]", "column 'body': {'\\x00': 1} holds a NUL character, which no sink stores"),
    ]


@pytest.mark.postgres
def test_a_postgres_double_key_moved_between_minus_zero_and_zero_is_one_row_to_the_fold(
    spark: SparkSession, postgres_dsn: str, slot: str, tmp_path: Path
) -> None:
    """PostgreSQL and the sink hold a double key's -0.0 and 0.0 as one row. Captured as written
    they were two fold keys: the UPDATE to 0.0 created a second row in the fold, the DELETE
    (of 0.0) left the -0.0 one, and the row inserted again as -0.0 was an UPDATE of a row the
    source had deleted: the fold held a row the table did not."""
    _run(postgres_dsn, "CREATE TABLE zeros (k float8 PRIMARY KEY, n int)")
    with change_source_at(postgres_dsn, ["zeros"], slot=slot):
        pass  # the slot exists from here on
    _run(postgres_dsn, "INSERT INTO zeros VALUES ('-0', 1)")
    _run(postgres_dsn, "UPDATE zeros SET k = 0.0, n = 2")
    _run(postgres_dsn, "DELETE FROM zeros")
    _run(postgres_dsn, "INSERT INTO zeros VALUES ('-0', 4)")
    log, checkpoint = tmp_path / "log", tmp_path / "checkpoint"
    _capture(postgres_dsn, log, journal=postgres_dsn, tables=["zeros"], slot=slot)
    spec = MaterializerSpec(name="zeros", table="zeros", change_log=str(log), sink=postgres_dsn)
    _materialize(spark, spec, checkpoint)

    with stores_at(postgres_dsn) as stores:
        versions = SchemaRegistry(stores.schemas).versions("zeros")
        messages = list(stores.change_sink.read_messages("zeros"))
    _, table = _materialized_table(postgres_dsn, spec)
    assert [(json.dumps(m.key), m.op) for m in messages] == [
        ("[0.0]", ChangeOp.CREATE),
        ("[0.0]", ChangeOp.UPDATE),
        ("[0.0]", ChangeOp.DELETE),
        ("[0.0]", ChangeOp.CREATE),
    ]
    assert table == {(0.0,): {"k": 0.0, "n": 4}}
    mutations = list(ParquetChangeLog(log).read("zeros"))
    report = check(versions=versions, mutations=mutations, messages=messages, table=table)
    assert report.broken_chains == report.table_not_fold == report.nonconforming == 0


def _items_with_note_dropped(
    spark: SparkSession, tmp_path: Path
) -> tuple[Path, str, Path, Path, MaterializerSpec]:
    """SQLite table `items` (id, label, note) with rows 1 and 2 captured and materialized, then
    `note` dropped the documented way: the capture refused the drop until it was accepted as
    version 2, and has installed the triggers again. The app database, the journal, the change
    log, the checkpoint and the materializer."""
    journal = f"sqlite:///{tmp_path / 'ordo.db'}"
    app, log, checkpoint, spec = _sqlite_materialized(
        spark,
        tmp_path,
        journal,
        "CREATE TABLE items (id INTEGER PRIMARY KEY, label TEXT, note TEXT)",
        "INSERT INTO items VALUES (1, 'a', 'n1'), (2, 'b', 'n2')",
    )
    _run_sqlite(  # the documented way to drop a column the triggers name
        app,
        *(f'DROP TRIGGER "ordo_cdc_items_{event}"' for event in ("insert", "update", "delete")),
        "ALTER TABLE items DROP COLUMN note",
    )
    with pytest.raises(IncompatibleSchemaError, match="'note' dropped"):
        _capture(str(app), log, journal=journal, tables=["items"])
    with stores_at(journal) as stores:
        SchemaRegistry(stores.schemas).accept("items", 2)
    _capture(str(app), log, journal=journal, tables=["items"])  # installs the triggers again
    return app, journal, log, checkpoint, spec


def test_a_dropped_column_leaves_the_messages_and_the_materialized_table_once_accepted(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The first message under the accepted version describes the row without the column, and
    the table drops it, for the rows written since and those written before alike: the table is
    the fold of the messages over the columns of the table's current schema."""
    app, journal, log, checkpoint, spec = _items_with_note_dropped(spark, tmp_path)
    _run_sqlite(
        app, "UPDATE items SET label = 'a2' WHERE id = 1", "INSERT INTO items VALUES (3, 'c')"
    )
    _capture(str(app), log, journal=journal, tables=["items"])
    _materialize(spark, spec, checkpoint)

    with stores_at(journal) as stores:
        current = SchemaRegistry(stores.schemas).current("items")
        messages = list(stores.change_sink.read_messages("items"))
        table = stores.change_sink.read_table(spec.target_table, current.schema)
    with closing(sqlite3.connect(tmp_path / "ordo.db")) as conn:
        columns = conn.execute("SELECT name FROM pragma_table_info(?)", (spec.target_table,))
        assert [name for (name,) in columns] == ["id", "label"]
    assert table == {
        (1,): {"id": 1, "label": "a2"},
        (2,): {"id": 2, "label": "b"},
        (3,): {"id": 3, "label": "c"},
    }
    update = next(m for m in messages if m.key == (1,) and m.op is ChangeOp.UPDATE)
    assert update.schema_id == current.schema_id
    assert (update.before, update.after) == ({"id": 1, "label": "a"}, {"id": 1, "label": "a2"})


def test_a_column_dropped_and_added_again_comes_back_empty(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The values written before the drop stay gone in the messages and the table; the G6
    check, over the messages of three versions, is clean."""
    app, journal, log, checkpoint, spec = _items_with_note_dropped(spark, tmp_path)
    _run_sqlite(app, "ALTER TABLE items ADD COLUMN note TEXT")
    _capture(str(app), log, journal=journal, tables=["items"])  # registers version 3
    _run_sqlite(
        app,
        "UPDATE items SET label = 'b2' WHERE id = 2",
        "UPDATE items SET note = 'm1' WHERE id = 1",
    )
    _capture(str(app), log, journal=journal, tables=["items"])
    _materialize(spark, spec, checkpoint)

    with stores_at(journal) as stores:
        registry = SchemaRegistry(stores.schemas)
        current, versions = registry.current("items"), registry.versions("items")
        messages = list(stores.change_sink.read_messages("items"))
        table = stores.change_sink.read_table(spec.target_table, current.schema)
    assert current.version == 3
    assert table == {
        (1,): {"id": 1, "label": "a", "note": "m1"},
        (2,): {"id": 2, "label": "b2", "note": None},
    }
    update = next(m for m in messages if m.key == (2,) and m.op is ChangeOp.UPDATE)
    assert (update.schema_id, update.before, update.after) == (
        current.schema_id,
        {"id": 2, "label": "b", "note": None},
        {"id": 2, "label": "b2", "note": None},
    )
    mutations = list(ParquetChangeLog(log).read("items"))
    report = check(versions=versions, mutations=mutations, messages=messages, table=table)
    assert report.is_clean, report.violations()
