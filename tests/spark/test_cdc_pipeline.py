"""CDC end to end: PostgreSQL capture with restarts -> change log -> materializer with restarts,
and the replica simulation (G6) with 3 replicas."""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Sequence
from itertools import pairwise
from pathlib import Path

import psycopg
import pytest
from pyspark.sql import SparkSession

from ordo.cdc import ChangeOp, Publisher, SchemaRegistry
from ordo.cdc.capture import Capture
from ordo.simulation.cdc import ReplicaWorkload, check
from ordo.spark.cdc_simulation import run_cdc_simulation
from ordo.spark.materializer import MaterializerSpec, materialize
from ordo.storage.change_sources import change_source_at
from ordo.storage.open import stores_at
from ordo.storage.parquet import ParquetChangeLog
from ordo.storage.postgres.change_source import PostgresChangeSource

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
    name = f"ordo_test_{secrets.token_hex(6)}"
    yield name
    with PostgresChangeSource(postgres_dsn, slot=name, tables=["accounts"]) as source:
        source.drop()


def _run(dsn: str, *statements: str | tuple[str, Sequence[object]]) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute("SET synchronous_commit = on")  # the test server defers WAL flushes
        for statement in statements:
            query, params = (statement, ()) if isinstance(statement, str) else statement
            conn.execute(query, params)


def _capture(dsn: str, slot: str, log: Path) -> None:
    """One capture run until idle, with a fresh process's objects (a restart each time)."""
    with (
        stores_at(dsn) as stores,
        change_source_at(dsn, ["accounts", "notes"], slot=slot) as source,
    ):
        Capture(source, Publisher(ParquetChangeLog(log)), SchemaRegistry(stores.schemas)).run(
            until_idle=True
        )


def _materialize(spark: SparkSession, spec: MaterializerSpec, checkpoint: Path) -> None:
    query = materialize(spark, spec, checkpoint=str(checkpoint), available_now=True)
    query.awaitTermination(180)
    assert query.exception() is None


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
    _capture(postgres_dsn, slot, log)
    _materialize(spark, spec, checkpoint)

    _run(  # one transaction over two tables, a key change and a delete
        postgres_dsn,
        "UPDATE accounts SET balance = balance + 1 WHERE id = 2",
        "INSERT INTO notes VALUES (1, 'moved bob')",
        "UPDATE accounts SET id = 3 WHERE id = 2",
    )
    _run(postgres_dsn, "DELETE FROM accounts WHERE id = 1")
    _run(postgres_dsn, "INSERT INTO accounts VALUES (4, 'cy', 0, NULL)")
    _capture(postgres_dsn, slot, log)  # a restarted capture
    _materialize(spark, spec, checkpoint)  # a restarted materializer, same checkpoint

    with stores_at(postgres_dsn) as stores:
        schema = SchemaRegistry(stores.schemas).current("accounts").schema
        messages = list(stores.change_sink.read_messages("accounts"))
        table = stores.change_sink.read_table(spec.target_table, schema)
    by_key: dict[object, list[object]] = {}
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
    report = check(schema=schema, mutations=mutations, messages=messages, table=table)
    assert report.broken_chains == report.table_not_fold == report.nonconforming == 0
    assert len(mutations) == len({m.audit.position for m in mutations})  # nothing published twice
