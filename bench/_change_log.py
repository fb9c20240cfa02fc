"""A change log for the bench scripts: an `items` table's updates, published as a capture does.

Imported by bench/compact.py and bench/local_files.py; running it directly does nothing (`make
bench` runs every bench/*.py file).
"""

from __future__ import annotations

import sqlite3
import sys
import time
from contextlib import closing
from dataclasses import dataclass
from itertools import count, cycle
from pathlib import Path

from pyspark.sql import SparkSession

from ordo.cdc import (
    Audit,
    Cell,
    Column,
    ColumnType,
    Mutation,
    Publisher,
    SchemaRegistry,
    TableSchema,
    partition_of,
)
from ordo.spark import MaterializerSpec
from ordo.spark.cdc_simulation import sink_url
from ordo.spark.materializer import materialize_available
from ordo.storage.open import stores_at
from ordo.storage.parquet import ParquetChangeLog

PARTITIONS = 8
ITEMS = TableSchema(
    table="items",
    columns=(
        Column(name="id", type=ColumnType.LONG, nullable=False),
        Column(name="name", type=ColumnType.STRING),
        Column(name="qty", type=ColumnType.LONG),
    ),
    partition_key=("id",),
)


class Writes:
    """The capture's stream of updates: each publish sets `rows` keys of every partition.

    Keys are taken in turn from each partition's share of `keys` (at least one a partition),
    so that every publish writes one file in every partition, as a busy table's flush does.
    Positions follow each other over the whole stream, as a source's log positions do.
    """

    def __init__(self, *, keys: int, rows: int, schema_id: int) -> None:
        self._rows, self._schema_id = rows, schema_id
        per_partition = max(keys // PARTITIONS, 1)
        shares: list[list[int]] = [[] for _ in range(PARTITIONS)]
        for key in count(1):
            share = shares[partition_of((key,), PARTITIONS)]
            if len(share) < per_partition:
                share.append(key)
            if all(len(s) == per_partition for s in shares):
                break
        self._turns = [cycle(share) for share in shares]
        self._positions = count(1)

    def next_publish(self) -> list[Mutation]:
        """The next publish's mutations, in commit order."""
        return [
            self._update(next(turn), next(self._positions))
            for turn in self._turns
            for _ in range(self._rows)
        ]

    def _update(self, key: int, position: int) -> Mutation:
        return Mutation(
            table=ITEMS.table,
            partition_key=(key,),
            cells={
                "name": Cell(value=f"item-{key}-{position}", write_time=position),
                "qty": Cell(value=position, write_time=position),
            },
            liveness=Cell(value=True, write_time=position),
            schema_id=self._schema_id,
            audit=Audit(source="bench", segment="bench", position=position),
        )


@dataclass(frozen=True, slots=True)
class Materializer:
    """A materializer of one of the bench's logs: its spec and checkpoint (in the log's root)."""

    root: Path
    name: str

    @property
    def spec(self) -> MaterializerSpec:
        return MaterializerSpec(
            name=self.name,
            table=ITEMS.table,
            change_log=str(self.root / "log"),
            sink=sink_url(self.root),
            target_table=f"{self.name}_items",
        )

    def run(self, spark: SparkSession) -> float:
        """One available-now run from the checkpoint; its wall seconds."""
        checkpoint = str(self.root / f"checkpoint-{self.name}")
        return materialize_available(spark, self.spec, checkpoint=checkpoint)

    def table(self) -> list[tuple[object, ...]]:
        """The materialized table's rows, by key."""
        with closing(sqlite3.connect(self.root / "sink.db")) as conn:
            return conn.execute(
                f"SELECT id, name, qty FROM {self.name}_items ORDER BY id"
            ).fetchall()


def make_log(root: Path, *, publishes: int, rows: int, keys: int) -> Writes:
    """The sink (schema registered) and the log of `publishes` publishes, in `root`."""
    root.mkdir()
    with stores_at(sink_url(root)) as stores:
        schema_id = SchemaRegistry(stores.schemas).register(ITEMS).schema_id
    writes = Writes(keys=keys, rows=rows, schema_id=schema_id)
    publisher = Publisher(ParquetChangeLog(root / "log"), partitions=PARTITIONS)
    started = time.perf_counter()
    for _ in range(publishes):
        publisher.publish(writes.next_publish())
    print(
        f"published {publishes:,} times in {time.perf_counter() - started:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    return writes
