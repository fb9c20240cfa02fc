"""`ordo cdc simulate` on Spark: replica deliveries -> change log -> materializer -> G6 check."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from ordo.cdc import Mutation, Publisher, SchemaRegistry, TableSchema
from ordo.errors import ConfigurationError
from ordo.simulation.cdc import SIMULATED_SCHEMA, CdcReport, ReplicaWorkload, check
from ordo.simulation.cdc.replicas import replica_mutations
from ordo.spark.materializer import MaterializerSpec, materialize_available
from ordo.storage.open import open_existing_stores, stores_at
from ordo.storage.parquet import ParquetChangeLog
from ordo.storage.stores import Stores

PARTITIONS = 8
RUN_PREFIX = "cdc_simulation_"


@dataclass(frozen=True, slots=True, kw_only=True)
class CdcSimulationResult:
    """The checker's report, how many deliveries went through, and how fast.

    `run` names what the run left in a sink it was given (`SimulationRun`); None for the
    default sink, which goes with the run's work directory.
    """

    report: CdcReport
    deliveries: int
    seconds: float
    """Wall time of the materializer run (start to termination)."""
    run: str | None = None

    def to_json(self) -> dict[str, object]:
        """The one JSON object `ordo cdc simulate --json` prints (`run` only when left behind)."""
        document: dict[str, object] = {
            "violations": self.report.violations(),
            "clean": self.report.is_clean,
            "deliveries": self.deliveries,
            "messages": self.report.messages,
            "rows": self.report.rows,
            "materializer_seconds": round(self.seconds, 3),
            "mutations_per_s": round(self.deliveries / self.seconds) if self.seconds else 0,
        }
        if self.run is not None:
            document["run"] = self.run
        return document


@dataclass(frozen=True, slots=True)
class SimulationRun:
    """The names one run takes in its sink, all from one fresh name (`fresh`).

    A sink may be a database an operator uses (`--sink`): a run writing under a fixed name
    would add a version to a `readings` schema someone registered, mix its messages with
    another materializer's, and upsert into a table it did not make. The run's table (its
    schema's and change log's), its materializer and its target table `<name>_materialized`
    are all `name`, unused in the sink (`require_unused`).
    """

    name: str

    @classmethod
    def fresh(cls) -> SimulationRun:
        """A run with a name of its own: RUN_PREFIX and 48 random bits."""
        return cls(f"{RUN_PREFIX}{secrets.token_hex(6)}")

    @property
    def schema(self) -> TableSchema:
        """The simulated schema, for the run's table."""
        return dataclasses.replace(SIMULATED_SCHEMA, table=self.name)

    @property
    def target_table(self) -> str:
        """The materialized table (the materializer's default name for it)."""
        return f"{self.name}_materialized"

    def require_unused(self, stores: Stores) -> None:
        """ConfigurationError when the sink holds a schema, materializer or table of the name.

        A fresh name is practically never taken; this makes sure that a run adds to nothing
        the sink held (the materializer adopts a target table that exists).
        """
        taken = [
            what
            for what, is_taken in (
                (f"schema {self.name}", bool(stores.schemas.versions(self.name))),
                (
                    f"materializer {self.name}",
                    stores.change_sink.last_batch_id(self.name) is not None,
                ),
                (f"table {self.target_table}", stores.change_sink.has_table(self.target_table)),
            )
            if is_taken
        ]
        if taken:
            msg = (
                f"the sink already holds {', '.join(taken)}: a simulation run writes under "
                "names of its own only; run it again (a new run takes a new name)"
            )
            raise ConfigurationError(msg)


def sink_url(work_dir: Path) -> str:
    """The default SQLite sink (registry, messages, materialized table) of a run in `work_dir`."""
    return f"sqlite:///{work_dir / 'sink.db'}"


@contextmanager
def sink_stores(sink: str | None, *, work_dir: Path) -> Iterator[Stores]:
    """The stores of the run's sink: `sink`, else a new SQLite file in `work_dir`.

    A given sink must be an ordo database of this version (`open_existing_stores`): nothing of
    it is created or upgraded, as a misspelt URL must not become a new database, nor an
    operator's older journal be altered under its writers.
    """
    if sink is None:
        with stores_at(sink_url(work_dir)) as stores:
            yield stores
        return
    stores = open_existing_stores(sink, mode="write", what="sink database")
    try:
        yield stores
    finally:
        stores.close()


def publish_deliveries(
    workload: ReplicaWorkload,
    *,
    run: SimulationRun,
    work_dir: Path,
    sink: str | None = None,
    on_recorded: Callable[[], object] = lambda: None,
) -> list[Mutation]:
    """Publish the workload's replica deliveries into `<work_dir>/log` (schema registered).

    The run's schema goes to `sink` (`sink_stores`), once `run`'s names are found unused there;
    `on_recorded()` is called once it is in: the first of the run's names the sink keeps.
    Returns the deliveries, for the run's table with its schema id.
    """
    with sink_stores(sink, work_dir=work_dir) as stores:
        run.require_unused(stores)
        schema_id = SchemaRegistry(stores.schemas).register(run.schema).schema_id
    on_recorded()
    deliveries = [
        dataclasses.replace(m, table=run.name, schema_id=schema_id)
        for m in replica_mutations(workload)
    ]
    Publisher(ParquetChangeLog(work_dir / "log"), partitions=PARTITIONS).publish(deliveries)
    return deliveries


def run_cdc_simulation(
    spark: SparkSession,
    workload: ReplicaWorkload,
    *,
    work_dir: Path,
    sink: str | None = None,
    run: SimulationRun | None = None,
    on_recorded: Callable[[], object] = lambda: None,
) -> CdcSimulationResult:
    """Publish the workload's replica deliveries, materialize them, and check G6.

    The materializer writes to `sink` (default: an SQLite file in `work_dir`) under the names
    of `run` (default: a fresh `SimulationRun`), and the checker reads them back from there.
    What it wrote in a given sink stays, whatever the verdict (docs/cdc.md says how to remove
    it): a caller that may be stopped before the result names the run picks it beforehand,
    and names it once `on_recorded()` was called (`publish_deliveries`), before which the run
    left nothing there (Spark did not start, or the sink refused the run's schema).
    """
    run = run or SimulationRun.fresh()
    deliveries = publish_deliveries(
        workload, run=run, work_dir=work_dir, sink=sink, on_recorded=on_recorded
    )
    spec = MaterializerSpec(
        name=run.name,
        table=run.name,
        change_log=str(work_dir / "log"),
        sink=sink or sink_url(work_dir),
    )
    seconds = materialize_available(spark, spec, checkpoint=str(work_dir / "checkpoint"))
    with sink_stores(sink, work_dir=work_dir) as stores:
        messages = list(stores.change_sink.read_messages(run.name))
        table = stores.change_sink.read_table(run.target_table, run.schema)
        versions = stores.schemas.versions(run.name)
    report = check(versions=versions, mutations=deliveries, messages=messages, table=table)
    return CdcSimulationResult(
        report=report,
        deliveries=len(deliveries),
        seconds=seconds,
        run=None if sink is None else run.name,
    )
