"""`ordo status`: the journal, processors, CDC captures and materializers in one view."""

from __future__ import annotations

import os
import time
from pathlib import Path

import click

from ordo.cli.cdc_options import change_log_option, require_named_change_log, source_status_options
from ordo.cli.options import (
    beyond_token,
    claim_age,
    claim_timeout_ms,
    journal_option,
    json_option,
    pending_request,
    print_json,
    require_journal,
    shown_token,
    without_tokens,
)
from ordo.settings import OperationsSettings
from ordo.storage.open import existing_stores_at
from ordo.tools.status import Status, cdc_status, every_processor_status, journal_status
from ordo.wording import counted, shown_name


@click.command()
@journal_option
@json_option
@change_log_option
@source_status_options
def status(
    journal_url: str | None,
    as_json: bool,
    change_log: Path,
    source_url: str | None,
    tables: tuple[str, ...],
    slot: str,
) -> None:
    """Show the journal, every processor, CDC captures and materializers.

    Journal: its id, events, persistence ids, tags, time buckets, write rate, live writers.
    Processors: segments with owners, tokens, claim age, and lag in events and in time.
    CDC: change logs, materializers, and the captures' lag and retained WAL (the journal's
    wal2json slots on PostgreSQL, or the capture --source names).

    Counting reads whole tables: this is an operator's view, not something to poll often.
    """
    url = require_journal(journal_url)
    require_named_change_log(change_log)
    now_ms = time.time_ns() // 1_000_000
    timeout_ms = claim_timeout_ms()
    with existing_stores_at(url) as stores:
        summary = stores.journal.summary()
        lease_timeout_ms = OperationsSettings.from_env(os.environ).writer_lease_timeout_ms
        journal = journal_status(
            stores.operations,
            journal_id=summary.journal_id,
            events=summary.events,
            persistence_ids=summary.persistence_ids,
            tags={s.tag: s.events for s in stores.tag_views.tags()},
            writers=stores.operations.live_writers(since_ms=now_ms - lease_timeout_ms),
            now_ms=now_ms,
        )
        processors = every_processor_status(
            stores.tokens, stores.operations, now_ms=now_ms, claim_timeout_ms=timeout_ms
        )
    cdc = cdc_status(url, change_log, source_url=source_url, tables=tables, slot=slot)
    found = Status(journal=journal, processors=processors, cdc=cdc)
    if as_json:
        print_json(found.to_json())
    else:
        _print(found)


def _print(found: Status) -> None:
    """The status as tables (the text output).

    rich is imported here: every `ordo` command imports this module, and only this output uses it.
    """
    from rich.table import Table

    from ordo.cli.cdc_status import cdc_table
    from ordo.cli.tables import print_tables

    journal = found.journal
    overview = Table(title="journal", show_header=False)
    overview.add_row("journal id", journal.journal_id or "-")
    overview.add_row("events", f"{journal.events:,}")
    overview.add_row("persistence ids", f"{journal.persistence_ids:,}")
    tags = (f"{shown_name(t, separators=',')} ({n:,})" for t, n in journal.tags.items())
    overview.add_row("tags", ", ".join(tags) or "-")
    overview.add_row("time buckets", f"{journal.time_buckets:,}")
    overview.add_row("write rate", f"{journal.events_per_s:,} events/s (last minute)")
    overview.add_row("live writers", str(journal.live_writers))
    processors = Table(title="processors")
    for column in ("processor", "segment", "owner", "token", "claim age", "lag"):
        processors.add_column(column)
    for processor in found.processors:
        name = shown_name(processor.processor)
        if processor.positions is not None:
            processors.add_row(name, "-", "-", without_tokens(processor.positions), "-", "-")
            continue
        assert processor.lag_events is not None  # noqa: S101 - a processor with tokens has one
        lag = counted(processor.lag_events, "event")
        if processor.lag_ms is not None:
            lag += f", {processor.lag_ms / 1000:,.1f} s"
        for segment in processor.segments:
            age = (
                "-"
                if segment.claim_age_ms is None
                else claim_age(segment, f"{segment.claim_age_ms / 1000:.1f} s")
            )
            processors.add_row(
                name,
                segment.segment,
                shown_name(segment.owner) if segment.owner else "-",
                "\n".join(
                    (shown_token(segment), *beyond_token(segment), *pending_request(segment))
                ),
                age,
                lag,
            )
    print_tables(overview, processors, cdc_table(found.cdc))
