"""How `ordo cdc status` prints: change logs, schemas, materializers and the capture's lag."""

from __future__ import annotations

import click

from ordo.tools.status import CdcStatus, retention, source_lag


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
    for source in status.sources:
        click.echo(
            f"source {source.name}: confirmed {source.confirmed_position}, head "
            f"{source.head_position}, lag {source_lag(source)}; {retention(source)}"
        )
