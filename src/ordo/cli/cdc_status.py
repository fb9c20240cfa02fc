"""How the CDC part of a status prints (`ordo cdc status`, and `ordo status`'s CDC table)."""

from __future__ import annotations

from rich.table import Table

from ordo.tools.status import CdcStatus, retention, source_lag
from ordo.wording import counted, shown_name


def cdc_table(status: CdcStatus) -> Table:
    """One row per change log, schema version, materializer and capture.

    Print it with print_tables (ordo.cli.tables), which shows its names as they are.
    """
    table = Table(title="cdc")
    for column in ("part", "name", "state"):
        table.add_column(column)
    for log in status.change_logs:
        positions = ", ".join(f"{_segment(s)}@{p}" for s, p in log.last_positions.items()) or "-"
        unrecorded = "" if log.has_partition_record else " with files (no count recorded)"
        state = (
            f"{counted(log.mutations, 'mutation')} in {counted(log.files, 'file')}, "
            f"{counted(log.partitions, 'partition')}{unrecorded}; last {positions}"
        )
        table.add_row("change log", shown_name(log.table), state)
    for version in status.schemas:
        accepted = "accepted" if version.is_accepted else "PENDING"
        table.add_row(
            "schema",
            shown_name(version.table),
            f"v{version.version} id={version.schema_id} {accepted}",
        )
    for progress in status.materializers:
        query = progress.query_id or "not recorded yet"
        state = f"batch {progress.batch_id}, {counted(progress.messages, 'message')}; query {query}"
        table.add_row("materializer", shown_name(progress.materializer), state)
    for source in status.sources:  # named by segment, as the change logs' last positions are
        slot = "" if source.slot is None else f"slot {source.slot}, "
        state = (
            f"{slot}confirmed {source.confirmed_position}, head {source.head_position}, "
            f"lag {source_lag(source)}; {retention(source)}"
        )
        table.add_row("capture", shown_name(source.segment), state)
    return table


def _segment(segment: str) -> str:
    """A segment in a change log's list of last positions, quoted if it holds `@` or `,`.

    Audit segments are any text: shown raw, `last a@1, b@2` was segment `a@1, b` at 2, or
    segments `a` at 1 and `b` at 2.
    """
    return shown_name(segment, separators="@,")
