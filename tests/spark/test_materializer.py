"""The CDC materializer on Spark: full-row messages, the materialized table, exactly once."""

from __future__ import annotations

import json
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
