"""The materializer over a change log that `ordo cdc compact` merged between and inside its runs.

A merged file is a new file to Spark's file source, so a materializer that read its originals
reads their rows again, and one that had planned a batch of files a compaction then removed
replays that batch without them: the messages must still be each change's one message, as a
materializer that never saw the log before compaction makes them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

from cdc_support import USERS
from operations_support import execute
from ordo.cdc import Audit, Cell, Column, ColumnType, Mutation, SchemaRegistry, TableSchema
from ordo.cdc.change_rows import ChangeRows
from ordo.errors import IncompatibleSchemaError
from ordo.spark import MaterializerSpec, materialize, materializer
from ordo.spark.change_sink import apply_batch
from ordo.storage.open import stores_at
from ordo.storage.parquet import ParquetChangeLog
from ordo.storage.parquet.compaction import CompactionReceipt, compact_table

pytestmark = pytest.mark.spark

AGE_AS_TEXT = TableSchema(  # incompatible (age long -> string): pending until accepted
    table="users",
    columns=(*USERS.columns[:2], Column(name="age", type=ColumnType.STRING)),
    partition_key=("id",),
)


def _publish(log: ParquetChangeLog, first: int, schema_id: int) -> list[int]:
    """Three publishes of four writes (users 1-4, names only) at positions from `first`, each a
    file in partitions 0 (users 1, 2) and 1 (users 3, 4); the positions."""
    positions = []
    for position in range(first, first + 12, 4):
        for partition in (0, 1):
            writes = [
                Mutation(
                    table="users",
                    partition_key=(key,),
                    cells={"name": Cell(value=f"user-{key}-{at}", write_time=at)},
                    liveness=Cell(value=True, write_time=at),
                    schema_id=schema_id,
                    audit=Audit(source="test", segment="log", position=at),
                )
                for at, key in (
                    (position + 2 * partition + k, 2 * partition + k + 1) for k in range(2)
                )
            ]
            log.append("users", [(partition, ChangeRows.from_mutations(writes))])
            positions += [w.audit.position for w in writes]
    return positions


def _run(spark: SparkSession, spec: MaterializerSpec, checkpoint: Path) -> None:
    materialize(spark, spec, checkpoint=str(checkpoint), available_now=True).awaitTermination(120)


def _listed(checkpoint: Path) -> set[str]:
    """The files the checkpoint's file source log holds: those its batches were planned with."""
    batches = (checkpoint / "sources" / "0").glob("[0-9]*")
    lines = (line for batch in batches for line in batch.read_text().splitlines())
    return {Path(json.loads(line)["path"]).name for line in lines if line.startswith("{")}


def _dead_letters(checkpoint: Path) -> list[int]:
    """The positions of the changes a materializer sent to its dead letters."""
    return sorted(pq.read_table(checkpoint / "dead_letters").column("position").to_pylist())


def _messages(url: str, materializer: str) -> list[tuple[Any, ...]]:
    """(key, position, op, before, after) of each message, by key and position."""
    return sorted(
        execute(
            url,
            "SELECT key_json, position, op, before_json, after_json FROM cdc_messages "
            "WHERE materializer = ?",
            (materializer,),
        )
    )


def test_compaction_beside_a_materializer_changes_none_of_its_messages(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run 1 reads the first files; run 2 plans a batch of the next ones and fails in it (a
    version still pending). Compaction merges both into files the source has not seen and
    removes them; run 3 replays the planned batch without them (Spark drops a listed file that
    is gone when it plans a batch), then plans one of the merged files and new ones, which a
    second compaction removes before the batch reads them (a compaction racing a running
    materializer); run 4 reads the files that compaction made. Each change has one message, as
    from a fresh materializer over the compacted log. Without `ignoreMissingFiles` on the
    materializer's source, run 3 failed on the files removed under its batch."""
    url = f"sqlite:///{tmp_path / 'sink.db'}"
    with stores_at(url) as stores:
        v1 = SchemaRegistry(stores.schemas).register(USERS).schema_id
    log = ParquetChangeLog(tmp_path / "log")
    spec = MaterializerSpec(name="users", table="users", change_log=str(log.root), sink=url)
    positions = _publish(log, 1, v1)
    unknown = Mutation(  # a column no version has: a dead letter
        table="users",
        partition_key=(1,),
        cells={"nickname": Cell(value="x", write_time=13)},
        audit=Audit(source="test", segment="log", position=13),
    )
    log.append("users", [(0, ChangeRows.from_mutations([unknown]))])
    _run(spark, spec, tmp_path / "ck")
    with stores_at(url) as stores:
        with pytest.raises(IncompatibleSchemaError):
            SchemaRegistry(stores.schemas).register(AGE_AS_TEXT)
        v2 = stores.schemas.versions("users")[-1].schema_id
    positions += _publish(log, 101, v2)
    with pytest.raises(StreamingQueryException, match="IncompatibleSchemaError"):
        _run(spark, spec, tmp_path / "ck")
    assert len(_listed(tmp_path / "ck")) == 13  # both runs' files: the second's not applied

    receipt = compact_table(log, "users", max_rows=100)
    assert (receipt.files_before, receipt.files_after, receipt.rows) == (13, 2, 25)
    with stores_at(url) as stores:
        SchemaRegistry(stores.schemas).accept("users", 2)
    positions += _publish(log, 201, v2)
    compacted: list[CompactionReceipt] = []

    def compacting_first(
        spec: MaterializerSpec, path: str, batch: DataFrame, batch_id: int
    ) -> None:
        """The sink, after a compaction at the first batch with files (planned, not read)."""
        if batch_id == 2:
            compacted.append(compact_table(log, "users", max_rows=100))
        apply_batch(spec, path, batch, batch_id)

    monkeypatch.setattr(materializer, "apply_batch", compacting_first)
    _run(spark, spec, tmp_path / "ck")
    monkeypatch.undo()
    assert [(r.files_before, r.files_after) for r in compacted] == [(8, 2)]
    _run(spark, spec, tmp_path / "ck")
    merged = {file.name for _, file in log.files("users")}
    assert merged == {"log-1-210.parquet", "log-3-212.parquet"}
    assert merged <= _listed(tmp_path / "ck")  # read by run 4
    fresh = MaterializerSpec(
        name="fresh", table="users", change_log=str(log.root), sink=url, target_table="fresh"
    )
    _run(spark, fresh, tmp_path / "ck-fresh")

    messages = _messages(url, "users")
    assert sorted(position for _, position, *_ in messages) == sorted(positions)
    assert messages == _messages(url, "fresh")
    assert {op for _, _, op, *_ in messages} == {"create", "update"}
    # a dead letter is not folded, so its second reading sends it there again (docs/cdc.md)
    assert [_dead_letters(tmp_path / c) for c in ("ck", "ck-fresh")] == [[13, 13], [13]]
    rows = execute(url, "SELECT id, name FROM users_materialized ORDER BY id")
    assert rows == execute(url, "SELECT id, name FROM fresh ORDER BY id")
    assert rows == [(1, "user-1-209"), (2, "user-2-210"), (3, "user-3-211"), (4, "user-4-212")]
