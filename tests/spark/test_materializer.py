"""The CDC materializer on Spark: full-row messages, the materialized table, exactly once."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import suppress
from itertools import pairwise
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from cdc_support import USERS
from kill_support import run_until_killed
from operations_support import execute
from ordo.cdc import (
    Audit,
    Cell,
    Column,
    ColumnType,
    JsonValue,
    Mutation,
    SchemaRegistry,
    TableSchema,
)
from ordo.cdc.change_rows import ChangeRows
from ordo.cdc.mutation import snapshot_segment
from ordo.errors import (
    ConfigurationError,
    IncompatibleSchemaError,
    MaterializerCheckpointError,
    QueryFailedError,
    UnknownSchemaError,
)
from ordo.spark import MaterializerSpec, materialize
from ordo.spark.materializer import require_checkpoint
from ordo.spark.query_failure import query_failures
from ordo.storage.open import stores_at
from ordo.storage.parquet import ParquetChangeLog
from ordo.storage.parquet.log_schema import CHANGE_LOG_SCHEMA
from processing_support import wait_for

pytestmark = pytest.mark.spark

USERS_V2 = TableSchema(
    table="users",
    columns=(*USERS.columns, Column(name="email", type=ColumnType.STRING)),
    partition_key=("id",),
)
REPLICAS = ("10.0.0.1", "10.0.0.2", "10.0.0.3")


def _write(
    key: int,
    time: int,
    *,
    insert: bool = False,
    replicas: Sequence[str] = REPLICAS,
    segment: str = "CommitLog-1",
    schema_id: int | None = None,
    **cells: JsonValue,
) -> ChangeRows:
    """One write of user `key` at `time`, as each replica's commit log delivers it."""
    return ChangeRows.from_mutations(
        [
            Mutation(
                table="users",
                partition_key=(key,),
                cells={name: Cell(value=value, write_time=time) for name, value in cells.items()},
                liveness=Cell(value=True, write_time=time) if insert else None,
                schema_id=schema_id,
                audit=Audit(source="cassandra", replica=replica, segment=segment, position=time),
            )
            for replica in replicas
        ]
    )


def _delete(key: int, time: int) -> ChangeRows:
    return ChangeRows.from_mutations(
        [
            Mutation(
                table="users",
                partition_key=(key,),
                row_deleted_at=time,
                audit=Audit(
                    source="cassandra", replica=replica, segment="CommitLog-1", position=time
                ),
            )
            for replica in REPLICAS
        ]
    )


def _run(spark: SparkSession, spec: MaterializerSpec, checkpoint: Path) -> None:
    query = materialize(spark, spec, checkpoint=str(checkpoint), available_now=True)
    query.awaitTermination(120)
    assert query.exception() is None


def _messages(url: str) -> list[dict[str, Any]]:
    columns = "batch_id, ordinal, key_json, op, before_json, after_json, schema_id"
    rows = execute(url, f"SELECT {columns} FROM cdc_messages ORDER BY batch_id, ordinal")
    names = [c.strip() for c in columns.split(",")]
    found = [dict(zip(names, row, strict=True)) for row in rows]
    for message in found:
        for side in ("before", "after"):
            text = message.pop(f"{side}_json")
            message[side] = None if text is None else json.loads(text)
    return found


def _table(url: str, table: str) -> dict[int, tuple[Any, ...]]:
    rows = execute(url, f'SELECT * FROM "{table}" ORDER BY id')
    return {row[0]: tuple(row) for row in rows}


def _by_key(messages: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for message in messages:
        grouped.setdefault(message["key_json"], []).append(message)
    return grouped


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def sink_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'sink.db'}"
    else:
        yield request.getfixturevalue("postgres_dsn")


def test_messages_carry_full_rows_and_a_restart_continues_exactly_once(
    spark: SparkSession, sink_url: str, tmp_path: Path
) -> None:
    with stores_at(sink_url) as stores:
        v1 = SchemaRegistry(stores.schemas).register(USERS).schema_id
    log = ParquetChangeLog(tmp_path / "log")
    spec = MaterializerSpec(
        name="users-view",
        table="users",
        change_log=str(tmp_path / "log"),
        sink=sink_url,
        messages_path=str(tmp_path / "messages"),
    )
    log.append("users", [(0, _write(1, 10, insert=True, name="Ada", age=36))])
    log.append("users", [(1, _write(2, 11, insert=True, name="Bob", age=40))])
    log.append("users", [(0, _write(1, 20, age=37))])  # a partial update
    _run(spark, spec, tmp_path / "checkpoint")

    with stores_at(sink_url) as stores:  # a compatible change: a new nullable column
        v2 = SchemaRegistry(stores.schemas).register(USERS_V2).schema_id
    log.append("users", [(0, _write(1, 5, name="Stale"))])  # older than the name the state holds
    log.append("users", [(0, _write(1, 30, schema_id=v2, email="ada@example.com"))])
    log.append("users", [(1, _delete(2, 31))])
    log.append("users", [(1, _write(3, 32, insert=True, schema_id=v2, name="Cy"))])
    _run(spark, spec, tmp_path / "checkpoint")  # resumes from the checkpoint's state
    _run(spark, spec, tmp_path / "checkpoint")  # nothing new: nothing happens

    messages = _messages(sink_url)
    assert [m["ordinal"] for m in messages if m["batch_id"] == messages[0]["batch_id"]] == [
        0,
        1,
        2,
    ]
    by_key = _by_key(messages)
    assert {k: [m["op"] for m in ms] for k, ms in by_key.items()} == {
        "[1]": ["create", "update", "update"],
        "[2]": ["create", "delete"],
        "[3]": ["create"],
    }
    assert [m["after"] for m in by_key["[1]"]] == [
        {"id": 1, "name": "Ada", "age": 36},
        {"id": 1, "name": "Ada", "age": 37},
        {"id": 1, "name": "Ada", "age": 37, "email": "ada@example.com"},
    ]
    assert [m["schema_id"] for m in by_key["[1]"]] == [v1, v1, v2]
    for history in by_key.values():
        assert history[0]["before"] is None
        for previous, message in pairwise(history):
            # equal, in the newer message's schema (v2 adds a column, null until written)
            before, after = message["before"], previous["after"]
            assert before == {column: after.get(column) for column in before}
            assert set(after) <= set(before)
    assert _table(sink_url, "users_materialized") == {
        1: (1, "Ada", 37, "ada@example.com"),
        3: (3, "Cy", None, None),
    }
    files = pq.read_table(tmp_path / "messages").to_pylist()
    assert len(files) == len(messages) == 6


@pytest.fixture
def url(tmp_path: Path) -> str:
    """An SQLite sink with the users schema registered."""
    url = f"sqlite:///{tmp_path / 'sink.db'}"
    with stores_at(url) as stores:
        SchemaRegistry(stores.schemas).register(USERS)
    return url


def test_snapshot_rows_are_reads_and_bad_mutations_are_dead_letters(
    spark: SparkSession, tmp_path: Path, url: str
) -> None:
    log = ParquetChangeLog(tmp_path / "log")
    snapshot = snapshot_segment("slot", 1)
    log.append("users", [(0, _write(1, 1, insert=True, replicas=[""], segment=snapshot, name="A"))])
    log.append("users", [(0, _write(2, 2, insert=True, replicas=[""], segment=snapshot, name="B"))])
    log.append("users", [(1, _write(1, 5, replicas=["r"], nickname="Al"))])  # no such column
    log.append("users", [(1, _write(2, 6, replicas=["r"], age="old"))])  # not a long
    log.append("users", [(1, _write(2, 7, replicas=["r"], schema_id=999, age=3))])  # no such id
    log.append("users", [(1, _write(2, 8, replicas=["r"], age=4))])
    spec = MaterializerSpec(name="snap", table="users", change_log=str(tmp_path / "log"), sink=url)
    _run(spark, spec, tmp_path / "checkpoint")

    ops = [(m["key_json"], m["op"]) for m in _messages(url)]
    assert sorted(ops) == [("[1]", "read"), ("[2]", "read"), ("[2]", "update")]
    assert _table(url, "users_materialized") == {1: (1, "A", None), 2: (2, "B", 4)}
    dead = pq.read_table(tmp_path / "checkpoint" / "dead_letters").to_pylist()
    reasons = [d["dead_letter_reason"] for d in dead]
    for expected in ("unknown column 'nickname'", "'old' is not a long", "no schema id 999"):
        assert sum(expected in reason for reason in reasons) == 1, reasons
    assert len(reasons) == 3
    assert {json.loads(d["mutation_json"])["audit"]["replica"] for d in dead} == {"r"}


def test_a_change_log_file_of_the_earlier_layout_is_read(
    spark: SparkSession, tmp_path: Path, url: str
) -> None:
    earlier = pa.schema(
        f for f in CHANGE_LOG_SCHEMA if f.name not in ("cell_values", "cell_values_time")
    )
    cells = {"name": {"value": "Ada", "write_time": 10, "ttl_s": None}}
    row = dict.fromkeys(earlier.names) | {
        "table": "users",
        "partition_key": "[1]",
        "clustering_key": "[]",
        "cells": json.dumps(cells),
        "liveness_time": 10,
        "source": "cassandra",
        "replica": "r",
        "segment": "CommitLog-1",
        "position": 10,
        "captured_at_us": 0,
        "published_at_us": 0,
    }
    directory = tmp_path / "log" / "users" / "partition=0"
    directory.mkdir(parents=True)
    pq.write_table(
        pa.Table.from_pylist([row], schema=earlier), directory / "CommitLog_1-10-10.parquet"
    )
    ParquetChangeLog(tmp_path / "log").append("users", [(0, _write(1, 20, replicas=["r"], age=37))])
    spec = MaterializerSpec(name="old", table="users", change_log=str(tmp_path / "log"), sink=url)
    _run(spark, spec, tmp_path / "checkpoint")

    assert [m["op"] for m in _messages(url)] == ["create", "update"]
    assert _table(url, "users_materialized") == {1: (1, "Ada", 37)}


def test_another_state_store_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    key = "spark.sql.streaming.stateStore.providerClass"
    configured = spark.conf.get(key)
    assert configured is not None  # start_session sets it
    spark.conf.set(
        key, "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
    )
    try:
        spec = MaterializerSpec(
            name="x", table="users", change_log=str(tmp_path), sink=f"sqlite:///{tmp_path}/s.db"
        )
        with pytest.raises(ConfigurationError, match="RocksDBStateStoreProvider"):
            materialize(spark, spec, checkpoint=str(tmp_path / "checkpoint"))
    finally:
        spark.conf.set(key, configured)


def test_a_checkpoint_made_with_four_partitions_resumes_with_its_state_in_a_session_of_two(
    spark: SparkSession, url: str, tmp_path: Path
) -> None:
    """Spark takes a stateful query's partitions from its checkpoint, not from the session.

    Sessions had 4 before they got one per core of a local master (the run's has 2).
    """
    log = ParquetChangeLog(tmp_path / "log")
    spec = MaterializerSpec(name="view", table="users", change_log=str(log.root), sink=url)
    checkpoint = tmp_path / "checkpoint"
    log.append("users", [(k % 2, _write(k, 10 + k, insert=True, name=f"u{k}")) for k in range(8)])
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    assert partitions == "2"  # start_session's for local[2]
    spark.conf.set("spark.sql.shuffle.partitions", "4")
    try:
        _run(spark, spec, checkpoint)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", partitions)
    log.append("users", [(k % 2, _write(k, 20 + k, age=30)) for k in range(8)])
    _run(spark, spec, checkpoint)

    by_key = _by_key(_messages(url))  # every key's state found: an update, not a second create
    assert {key: [m["op"] for m in ms] for key, ms in by_key.items()} == {
        f"[{k}]": ["create", "update"] for k in range(8)
    }
    assert _table(url, "users_materialized") == {k: (k, f"u{k}", 30) for k in range(8)}


def test_a_table_without_a_schema_is_refused_before_the_query_starts(
    spark: SparkSession, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path}/sink.db"
    with stores_at(url) as stores:
        SchemaRegistry(stores.schemas).register(USERS)
    spec = MaterializerSpec(name="x", table="user", change_log=str(tmp_path / "log"), sink=url)

    with pytest.raises(UnknownSchemaError, match="'user'"):
        materialize(spark, spec, checkpoint=str(tmp_path / "checkpoint"))
    assert not (tmp_path / "checkpoint").exists()
    assert not (tmp_path / "log").exists()


def test_the_sink_refuses_the_batches_of_a_query_run_from_another_checkpoint(
    spark: SparkSession, tmp_path: Path, url: str
) -> None:
    """Two checkpoints of one materializer, started together: neither has progress to check
    before its query starts, so the sink's check of each batch is what refuses the one whose
    batch commits second (before, its batch 0 was skipped as a replay of the other's)."""
    ParquetChangeLog(tmp_path / "log").append("users", [(0, _write(1, 10, insert=True, name="A"))])
    spec = MaterializerSpec(name="users", table="users", change_log=str(tmp_path / "log"), sink=url)
    queries = [  # a session runs one query of a name: two processes, as it were
        materialize(session, spec, checkpoint=str(tmp_path / name), available_now=True)
        for session, name in ((spark, "ck1"), (spark.newSession(), "ck2"))
    ]
    for query in queries:
        with suppress(StreamingQueryException):
            query.awaitTermination(120)

    (applied,) = [query for query in queries if query.exception() is None]
    (refused,) = [query for query in queries if query.exception() is not None]
    with pytest.raises(QueryFailedError) as failed, query_failures("materializer 'users'"):
        refused.awaitTermination()
    assert str(failed.value) == (
        "materializer 'users' failed: MaterializerCheckpointError: materializer 'users' was run "
        f"from another checkpoint: its progress in the sink (batch 0) was made by query "
        f"{applied.id}, this checkpoint is query {refused.id}'s; nothing was written. Run it "
        "with the checkpoint it was run from, or start over under another --name and another "
        "--target-table (name=, target_table=; the table's default does not follow the name), "
        "which materializes the change log from its beginning"
    )
    with stores_at(url) as stores:
        progress = [(p.batch_id, p.messages, p.query_id) for p in stores.change_sink.progress()]
    assert progress == [(0, 1, applied.id)]
    assert [m["op"] for m in _messages(url)] == ["create"]


def test_a_new_checkpoint_of_a_materializer_is_refused_before_its_query_starts(
    spark: SparkSession, tmp_path: Path, url: str
) -> None:
    ParquetChangeLog(tmp_path / "log").append("users", [(0, _write(1, 10, insert=True, name="A"))])
    spec = MaterializerSpec(name="users", table="users", change_log=str(tmp_path / "log"), sink=url)
    _run(spark, spec, tmp_path / "ck")
    _run(spark, spec, tmp_path / "ck")  # its own checkpoint: goes on

    with pytest.raises(MaterializerCheckpointError, match="this checkpoint is new;"):
        materialize(spark, spec, checkpoint=str(tmp_path / "new"))
    assert not (tmp_path / "new").exists()
    (tmp_path / "ck" / "metadata").write_text("{}\n")
    with pytest.raises(ConfigurationError, match="metadata holds no query id"):
        require_checkpoint(spec, str(tmp_path / "ck"))


def test_a_kept_checkpoint_is_refused_by_a_sink_without_its_progress(
    spark: SparkSession, tmp_path: Path, url: str
) -> None:
    """Starting over under the old name (its messages, progress and table deleted, docs/cdc.md)
    but with the old checkpoint: its fold state holds every row, so its next batch would bring
    only the rows changed since, as updates of messages the sink no longer has."""
    log = ParquetChangeLog(tmp_path / "log")
    log.append("users", [(0, _write(1, 10, insert=True, name="A"))])
    log.append("users", [(1, _write(2, 11, insert=True, name="B"))])
    spec = MaterializerSpec(name="users", table="users", change_log=str(tmp_path / "log"), sink=url)
    _run(spark, spec, tmp_path / "ck")
    for statement in (
        "DELETE FROM cdc_messages WHERE materializer = 'users'",
        "DELETE FROM cdc_materializer_progress WHERE materializer = 'users'",
        "DROP TABLE users_materialized",
    ):
        execute(url, statement)
    log.append("users", [(0, _write(1, 20, name="C"))])

    with pytest.raises(
        MaterializerCheckpointError,
        match=r"^materializer 'users' has no progress in the sink, but its checkpoint \(query "
        r".+\) is at batch 1: the fold state holds the changes of its batches 0 to 0,",
    ):
        materialize(spark, spec, checkpoint=str(tmp_path / "ck"))
    assert _messages(url) == []
    _run(spark, spec, tmp_path / "new")  # a new checkpoint starts from the log's beginning
    assert _table(url, "users_materialized") == {1: (1, "C", None), 2: (2, "B", None)}


def test_a_sink_restored_from_a_copy_behind_the_checkpoint_is_refused(
    spark: SparkSession, tmp_path: Path, url: str
) -> None:
    """The SQLite sink copied back from before the checkpoint's batch 1: the fold state holds
    users 2 and 3, whom the sink has no message of. Applied, batch 2 went on from there: user
    2's change was stored as an UPDATE of a row the messages never created, and user 3,
    untouched since, was missing from the table for good."""
    log = ParquetChangeLog(tmp_path / "log")
    spec = MaterializerSpec(name="users", table="users", change_log=str(tmp_path / "log"), sink=url)
    log.append("users", [(0, _write(1, 10, insert=True, name="A"))])
    _run(spark, spec, tmp_path / "ck")
    sink_file = Path(url.removeprefix("sqlite:///"))
    copy = sink_file.read_bytes()
    log.append(
        "users",
        [(0, _write(2, 11, insert=True, name="B")), (1, _write(3, 11, insert=True, name="C"))],
    )
    _run(spark, spec, tmp_path / "ck")
    sink_file.write_bytes(copy)
    log.append("users", [(0, _write(2, 20, name="B2"))])

    with pytest.raises(
        MaterializerCheckpointError,
        match=r"^materializer 'users' has progress in the sink up to batch 0, but its "
        r"checkpoint \(query .+\) is at batch 2: the fold state holds the changes of its "
        r"batches 1 to 1, which this sink does not have",
    ):
        materialize(spark, spec, checkpoint=str(tmp_path / "ck"))
    assert [m["key_json"] for m in _messages(url)] == ["[1]"]
    assert _table(url, "users_materialized") == {1: (1, "A", None)}


def test_an_accepted_retype_retypes_the_materialized_table_with_the_next_batch(
    spark: SparkSession, tmp_path: Path, url: str
) -> None:
    """The sink reads the former types from the registry: the rows written before the retype
    hold their values in the new type, as the rows written since do."""
    log = ParquetChangeLog(tmp_path / "log")
    log.append("users", [(0, _write(1, 10, insert=True, name="Ada", age=37))])
    spec = MaterializerSpec(name="users", table="users", change_log=str(tmp_path / "log"), sink=url)
    _run(spark, spec, tmp_path / "ck")
    age_as_text = TableSchema(
        table="users",
        columns=(*USERS.columns[:2], Column(name="age", type=ColumnType.STRING)),
        partition_key=("id",),
    )
    with stores_at(url) as stores:
        registry = SchemaRegistry(stores.schemas)
        with pytest.raises(IncompatibleSchemaError, match="'age' retyped long -> string"):
            registry.register(age_as_text)
        registry.accept("users", 2)
    log.append("users", [(0, _write(2, 20, insert=True, name="Bo", age="007"))])
    _run(spark, spec, tmp_path / "ck")

    assert _table(url, "users_materialized") == {1: (1, "Ada", "37"), 2: (2, "Bo", "007")}


DRIVER = Path(__file__).with_name("materializer_driver.py")
USERS_RETYPED = TableSchema(  # incompatible: age long -> string; and an email
    table="users",
    columns=(*USERS.columns[:2], Column(name="age", type=ColumnType.STRING), USERS_V2.columns[-1]),
    partition_key=("id",),
)


def _changes(
    rng: random.Random, *, chunks: int, per_chunk: int, start: int, schema_id: int
) -> list[list[Mutation]]:
    """`chunks` publishes of `per_chunk` writes over 300 users, positions after `start`.

    Inserts, partial updates, row deletes and writes of a column no version has (dead letters),
    a fifth delivered by two replicas; ages are strings unless under `schema_id` 1.
    """
    published: list[list[Mutation]] = []
    position = start
    for _ in range(chunks):
        mutations: list[Mutation] = []
        for _ in range(per_chunk):
            position += 1
            key, kind = rng.randrange(300), rng.random()
            age = rng.randrange(100)
            cells: dict[str, JsonValue] = {}
            if kind < 0.65:
                cells["age"] = age if schema_id == 1 else str(age)
            if kind < 0.3:
                cells["name"] = f"user-{key}-{position}"
            if kind >= 0.9:
                cells["nickname"] = "x"
            elif kind >= 0.75:
                cells["name" if schema_id == 1 else "email"] = f"{key}@{position}"
            mutations.extend(
                Mutation(
                    table="users",
                    partition_key=(key,),
                    cells={n: Cell(value=v, write_time=position) for n, v in cells.items()},
                    liveness=Cell(value=True, write_time=position) if kind < 0.3 else None,
                    row_deleted_at=position if 0.65 <= kind < 0.75 else None,
                    schema_id=schema_id,
                    audit=Audit(
                        source="cassandra", replica=replica, segment="log", position=position
                    ),
                )
                for replica in (("a", "b") if rng.random() < 0.2 else ("a",))
            )
        published.append(mutations)
    return published


def _publish(log: ParquetChangeLog, mutations: Sequence[Mutation]) -> None:
    """One publish into four partitions by key (every write of a key in one, in order)."""
    by_partition: dict[int, list[Mutation]] = {}
    for mutation in mutations:
        by_partition.setdefault(int(str(mutation.partition_key[0])) % 4, []).append(mutation)
    log.append("users", [(p, ChangeRows.from_mutations(m)) for p, m in by_partition.items()])


def _batch_ids(folder: Path) -> set[int]:
    """The batch ids of a checkpoint's `offsets` or `commits` log."""
    return {int(f.name) for f in folder.glob("*") if f.name.isdigit()}


def _stored_messages(url: str, materializer: str) -> list[tuple[Any, ...]]:
    """The materializer's messages as the sink stores them, in order, JSON texts parsed."""
    rows = execute(
        url,
        "SELECT batch_id, ordinal, key_json, op, before_json, after_json, schema_id, replica, "
        "position FROM cdc_messages WHERE materializer = ? ORDER BY batch_id, ordinal",
        (materializer,),
    )
    return [(*row[:4], *(_parsed(text) for text in row[4:6]), *row[6:]) for row in rows]


def _parsed(text: Any) -> Any:
    """A JSON text SQLite returns as text (PostgreSQL's driver parses its jsonb)."""
    return json.loads(text) if isinstance(text, str) else text


def _dead_letters(checkpoint: Path) -> list[tuple[Any, ...]]:
    columns = ["partition_key", "replica", "position", "dead_letter_reason", "mutation_json"]
    found = pq.read_table(checkpoint / "dead_letters", columns=columns).to_pylist()
    return sorted(tuple(row[c] for c in columns) for row in found)


@pytest.mark.timeout(900)  # three drivers, each starting Spark
@pytest.mark.parametrize(  # three Spark starts: on the sink G6's other proofs leave weakest
    "sink_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_a_materializer_killed_mid_run_resumes_to_what_an_uninterrupted_run_makes(
    spark: SparkSession, sink_url: str, tmp_path: Path
) -> None:
    """SIGKILLed three times, the test's session finishing the run: from outside in the middle
    of a batch; by itself once the sink committed a batch, before the batch's Parquet files and
    Spark's commit of it; and by itself inside the sink's transaction that retypes the table
    for an accepted version. An uninterrupted run of the same change log (another name,
    table and checkpoint in the same sink) is what it must come to: the same messages of each
    key, the same table and the same dead letters, and its Parquet messages the sink's."""
    with stores_at(sink_url) as stores:
        v1 = SchemaRegistry(stores.schemas).register(USERS).schema_id
    rng = random.Random(226)
    publishes = _changes(rng, chunks=6, per_chunk=400, start=0, schema_id=v1)
    log = ParquetChangeLog(tmp_path / "log")
    checkpoint, messages = tmp_path / "ck", tmp_path / "messages"
    arguments = [sink_url, str(tmp_path / "log"), str(checkpoint), str(messages)]
    _publish(log, publishes[0])
    driver = subprocess.Popen([sys.executable, str(DRIVER), *arguments])
    try:
        # 300 s: a guard against a hung driver, not an assertion
        wait_for(
            lambda: bool(_batch_ids(checkpoint / "commits")),
            timeout=300,
            what="the driver to commit a batch",
            process=driver,
        )
        _publish(log, publishes[1])
        wait_for(
            lambda: (
                max(_batch_ids(checkpoint / "offsets")) > max(_batch_ids(checkpoint / "commits"))
            ),
            timeout=300,
            what="the driver to plan a batch it has not committed",
            process=driver,
        )
        driver.send_signal(signal.SIGKILL)  # a batch planned and not committed: mid-batch
        assert driver.wait() == -signal.SIGKILL
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    _publish(log, publishes[2])
    run_until_killed(DRIVER, *arguments, "applied")
    with stores_at(sink_url) as stores:
        registry = SchemaRegistry(stores.schemas)
        with pytest.raises(IncompatibleSchemaError):
            registry.register(USERS_RETYPED)
        v2 = registry.accept("users", 2).schema_id
    later = _changes(rng, chunks=2, per_chunk=300, start=2400, schema_id=v2)
    _publish(log, [m for publish in (*publishes[3:], later[0]) for m in publish])
    run_until_killed(DRIVER, *arguments, "table")
    _publish(log, later[1])
    killed = MaterializerSpec(
        name="killed",
        table="users",
        change_log=str(tmp_path / "log"),
        sink=sink_url,
        messages_path=str(messages),
    )
    _run(spark, killed, checkpoint)
    whole = MaterializerSpec(
        name="whole",
        table="users",
        change_log=str(tmp_path / "log"),
        sink=sink_url,
        target_table="users_whole",
    )
    _run(spark, whole, tmp_path / "ck-whole")

    stored, expected = _stored_messages(sink_url, "killed"), _stored_messages(sink_url, "whole")
    by_key = _by_key_rows(stored)
    assert by_key == _by_key_rows(expected)
    assert len(stored) == len(expected) > 2000
    files = pq.read_table(messages).to_pylist()
    assert sorted((f["batch_id"], f["ordinal"], f["key_json"], f["op"]) for f in files) == [
        row[:4] for row in stored
    ]
    columns = "id, name, age, email"
    assert execute(sink_url, f"SELECT {columns} FROM users_materialized ORDER BY id") == execute(
        sink_url, f"SELECT {columns} FROM users_whole ORDER BY id"
    )
    dead = _dead_letters(checkpoint)
    assert dead == _dead_letters(tmp_path / "ck-whole")
    assert len(dead) > 200


def _by_key_rows(rows: Sequence[tuple[Any, ...]]) -> dict[str, list[tuple[Any, ...]]]:
    """Each key's messages in order, without the batch and ordinal, which batching sets."""
    grouped: dict[str, list[tuple[Any, ...]]] = {}
    for row in rows:
        grouped.setdefault(row[2], []).append(row[3:])
    return grouped
