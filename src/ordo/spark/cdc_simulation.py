"""`ordo cdc simulate` on Spark: replica deliveries -> change log -> materializer -> G6 check."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from ordo.cdc import Mutation, Publisher, SchemaRegistry
from ordo.simulation.cdc import SIMULATED_SCHEMA, CdcReport, ReplicaWorkload, check
from ordo.simulation.cdc.replicas import replica_mutations
from ordo.spark.materializer import MaterializerSpec, materialize_available
from ordo.storage.open import stores_at
from ordo.storage.parquet import ParquetChangeLog

MATERIALIZER = "simulation"
PARTITIONS = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class CdcSimulationResult:
    """The checker's report, how many deliveries went through, and how fast."""

    report: CdcReport
    deliveries: int
    seconds: float
    """Wall time of the materializer run (start to termination)."""

    def to_json(self) -> dict[str, object]:
        """The one JSON object `ordo cdc simulate --json` prints."""
        return {
            "violations": self.report.violations(),
            "clean": self.report.is_clean,
            "deliveries": self.deliveries,
            "messages": self.report.messages,
            "rows": self.report.rows,
            "materializer_seconds": round(self.seconds, 3),
            "mutations_per_s": round(self.deliveries / self.seconds) if self.seconds else 0,
        }


def sink_url(work_dir: Path) -> str:
    """The SQLite sink (registry, messages, materialized table) of a run in `work_dir`."""
    return f"sqlite:///{work_dir / 'sink.db'}"


def publish_deliveries(workload: ReplicaWorkload, *, work_dir: Path) -> list[Mutation]:
    """Publish the workload's replica deliveries into `<work_dir>/log` (schema registered).

    Returns the deliveries with their schema id.
    """
    with stores_at(sink_url(work_dir)) as stores:
        schema_id = SchemaRegistry(stores.schemas).register(SIMULATED_SCHEMA).schema_id
    deliveries = [dataclasses.replace(m, schema_id=schema_id) for m in replica_mutations(workload)]
    Publisher(ParquetChangeLog(work_dir / "log"), partitions=PARTITIONS).publish(deliveries)
    return deliveries


def run_cdc_simulation(
    spark: SparkSession, workload: ReplicaWorkload, *, work_dir: Path
) -> CdcSimulationResult:
    """Publish the workload's replica deliveries, materialize them, and check G6."""
    deliveries = publish_deliveries(workload, work_dir=work_dir)
    sink = sink_url(work_dir)
    spec = MaterializerSpec(
        name=MATERIALIZER,
        table=SIMULATED_SCHEMA.table,
        change_log=str(work_dir / "log"),
        sink=sink,
    )
    seconds = materialize_available(spark, spec, checkpoint=str(work_dir / "checkpoint"))
    with stores_at(sink) as stores:
        messages = list(stores.change_sink.read_messages(MATERIALIZER))
        table = stores.change_sink.read_table(spec.target_table, SIMULATED_SCHEMA)
        versions = stores.schemas.versions(SIMULATED_SCHEMA.table)
    report = check(versions=versions, mutations=deliveries, messages=messages, table=table)
    return CdcSimulationResult(report=report, deliveries=len(deliveries), seconds=seconds)
