"""The demo's CDC part: the projection's read model captured, materialized and checked.

Change triggers are installed on `order_totals` before the projection writes to it, so every
upsert the projection makes is a captured change. After the run the changes are published to a
change log and the Spark materializer turns them into full-row messages and a materialized copy
of the table; the check (G6) compares the copy with `order_totals` itself and with the fold of
the messages, and checks that each message's `before` is the previous `after` of its key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from ordo.cdc import Publisher, SchemaRegistry
from ordo.cdc.capture import Capture
from ordo.simulation.cdc import check
from ordo.spark.materializer import MaterializerSpec, materialize_available
from ordo.storage.change_sources import change_source_at
from ordo.storage.open import stores_at

TABLE = "order_totals"
MATERIALIZER = "order-totals-cdc"


@dataclass(frozen=True, slots=True, kw_only=True)
class CdcDemoReport:
    """What the CDC part found: changes captured, messages emitted, G6 violations."""

    changes: int
    messages: int
    violations: int

    def to_json_dict(self) -> dict[str, int]:
        """The CDC keys of `ordo demo --json`."""
        return {
            "cdc_changes": self.changes,
            "cdc_messages": self.messages,
            "cdc_violations": self.violations,
        }


def start_capture(journal: str) -> None:
    """Install the change triggers on the read model (before anything writes to it)."""
    with change_source_at(journal, [TABLE]):
        pass


def run_cdc_part(spark: SparkSession, *, journal: str, work_dir: Path) -> CdcDemoReport:
    """Capture the read model's changes, materialize them on Spark, and check G6."""
    from ordo.storage.parquet import ParquetChangeLog

    log = ParquetChangeLog(work_dir / "changelog")
    with stores_at(journal) as stores, change_source_at(journal, [TABLE]) as source:
        registry = SchemaRegistry(stores.schemas)
        totals = Capture(source, Publisher(log), registry).run(until_idle=True)
        schema = registry.current(TABLE).schema
        versions = registry.versions(TABLE)
    spec = MaterializerSpec(name=MATERIALIZER, table=TABLE, change_log=str(log.root), sink=journal)
    materialize_available(spark, spec, checkpoint=str(work_dir / "cdc-checkpoint"))
    with stores_at(journal) as stores:
        messages = list(stores.change_sink.read_messages(MATERIALIZER))
        copy = stores.change_sink.read_table(spec.target_table, schema)
        source_rows = stores.change_sink.read_table(TABLE, schema)
    report = check(versions=versions, mutations=log.read(TABLE), messages=messages, table=copy)
    differing = sum(
        1 for key in copy.keys() | source_rows.keys() if copy.get(key) != source_rows.get(key)
    )
    return CdcDemoReport(
        changes=sum(totals.published.values()),
        messages=len(messages),
        violations=sum(report.violations().values()) + differing,
    )
