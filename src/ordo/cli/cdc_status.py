"""What `ordo cdc status` shows: change logs, schemas, materializers and the capture's lag."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import click

from ordo.cdc import SchemaVersion, SourceStatus
from ordo.storage.change_sources import change_source_at
from ordo.storage.open import stores_at
from ordo.storage.parquet import ChangeLogSummary, ParquetChangeLog
from ordo.storage.sql_change_sink import MaterializerProgress


@dataclass(frozen=True, slots=True, kw_only=True)
class CdcStatus:
    """Every part of the CDC pipeline that can be inspected."""

    change_logs: list[ChangeLogSummary]
    schemas: list[SchemaVersion]
    materializers: list[MaterializerProgress]
    source: SourceStatus | None

    def to_json(self) -> dict[str, object]:
        """The status as one JSON document (`--json`)."""
        source = None
        if self.source is not None:
            source = {**dataclasses.asdict(self.source), "lag": _lag(self.source)}
        return {
            "change_logs": [dataclasses.asdict(s) for s in self.change_logs],
            "schemas": [
                {
                    "table": v.table,
                    "version": v.version,
                    "schema_id": v.schema_id,
                    "accepted": v.is_accepted,
                }
                for v in self.schemas
            ],
            "materializers": [dataclasses.asdict(m) for m in self.materializers],
            "source": source,
        }


def _lag(source: SourceStatus) -> int | None:
    if source.head_position is None or source.confirmed_position is None:
        return None
    return source.head_position - source.confirmed_position


def cdc_status(
    journal_url: str,
    change_log: Path,
    *,
    source_url: str | None,
    tables: Sequence[str],
    slot: str,
) -> CdcStatus:
    """Read the change logs, the registry, the materializers' progress and the source's lag."""
    log = ParquetChangeLog(change_log)
    with stores_at(journal_url) as stores:
        schemas = [v for table in stores.schemas.tables() for v in stores.schemas.versions(table)]
        materializers = list(stores.change_sink.progress())
    source = None
    if source_url is not None:
        with change_source_at(source_url, tables, slot=slot) as opened:
            source = opened.status()
    return CdcStatus(
        change_logs=[log.summary(table) for table in log.tables()],
        schemas=schemas,
        materializers=materializers,
        source=source,
    )


def print_status(status: CdcStatus) -> None:
    """The status as a few readable lines per part."""
    for summary in status.change_logs:
        positions = ", ".join(f"{s}@{p}" for s, p in summary.last_positions.items())
        click.echo(
            f"change log {summary.table}: {summary.mutations} mutations in {summary.files} "
            f"files, {summary.partitions} partitions; last {positions or '-'}"
        )
    for version in status.schemas:
        state = "accepted" if version.is_accepted else "PENDING"
        click.echo(f"schema {version.table} v{version.version} id={version.schema_id} {state}")
    for progress in status.materializers:
        click.echo(
            f"materializer {progress.materializer}: batch {progress.batch_id}, "
            f"{progress.messages} messages"
        )
    if status.source is not None:
        source = status.source
        retained = (
            f"{source.retained_bytes} bytes of WAL retained"
            if source.retained_bytes is not None
            else f"{source.retained_changes} changes waiting"
        )
        click.echo(
            f"source {source.name}: confirmed {source.confirmed_position}, head "
            f"{source.head_position}, lag {_lag(source)}; {retained}"
        )
