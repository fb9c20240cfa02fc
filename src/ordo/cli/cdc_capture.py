"""`ordo cdc capture`: a source database's committed changes into the change log."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import click

from ordo.cdc import Publisher, SchemaRegistry
from ordo.cdc.capture import Capture, CaptureTotals
from ordo.cli.cdc_options import change_log_option, partitions_option
from ordo.cli.integer_range import IntegerRange
from ordo.cli.options import (
    ThrottledProgress,
    int_option,
    journal_option,
    journal_to_write,
    progress,
)
from ordo.cli.termination import stoppable
from ordo.cli.variable_option import VariableOption
from ordo.interrupts import completing
from ordo.settings import CaptureSettings
from ordo.settings.loading import LONGEST_MS
from ordo.storage.change_sources import (
    DEFAULT_SLOT,
    check_change_source,
    held_change_source,
)
from ordo.storage.open import stores_at
from ordo.wording import counted


@click.command()
@journal_option
@change_log_option
@click.argument("source_url")
@click.option(
    "--table",
    "tables",
    multiple=True,
    required=True,
    help="A table to capture (PostgreSQL: table or schema.table; quote a part holding a dot: "
    '"my.table").',
)
@click.option("--slot", default=DEFAULT_SLOT, show_default=True, help="PostgreSQL slot name.")
@click.option("--snapshot", is_flag=True, help="First publish every captured table's rows.")
@click.option("--follow", is_flag=True, help="Keep capturing until interrupted.")
@partitions_option
@int_option(
    "--max-changes",
    1000,
    "Changes per window; a full window is published at once.",
    envvar="ORDO_MAX_CHANGES",
)
@int_option(
    "--flush-interval-ms",
    1000,
    "Publish a partly filled window at least this often.",
    maximum=LONGEST_MS,
    envvar="ORDO_CDC_FLUSH_INTERVAL_MS",  # not ORDO_FLUSH_INTERVAL_MS: the tag writer's
)
@click.option(
    "--reconnect-timeout-ms",
    cls=VariableOption,
    type=IntegerRange(min=0, max=LONGEST_MS),
    default=60_000,
    show_default=True,
    envvar="ORDO_RECONNECT_TIMEOUT_MS",
    show_envvar=True,
    help="Retry this long after the source or journal became unavailable (0: fail at once).",
)
def capture(
    journal_url: str | None,
    change_log: Path,
    source_url: str,
    tables: tuple[str, ...],
    slot: str,
    snapshot: bool,
    follow: bool,
    partitions: int | None,
    max_changes: int,
    flush_interval_ms: int,
    reconnect_timeout_ms: int,
) -> None:
    """Capture committed changes of SOURCE_URL's tables into the change log.

    SOURCE_URL is an SQLite file (change triggers are installed) or a PostgreSQL URL
    (a wal2json logical replication slot is created). Without --follow the capture stops
    once everything committed so far is published. Schemas are registered in --journal's
    registry; an incompatible schema change stops the capture until it is accepted. A lost
    connection (a restart, a failover) is retried with a backoff, a warning each time, for up
    to --reconnect-timeout-ms; nothing is lost or published twice.
    """
    from ordo.storage.parquet import ParquetChangeLog

    settings = CaptureSettings(
        max_changes=max_changes,
        flush_interval=timedelta(milliseconds=flush_interval_ms),
        reconnect_timeout=timedelta(milliseconds=reconnect_timeout_ms),
    )
    log = ParquetChangeLog(change_log)
    publisher = Publisher(log, partitions=partitions)
    journal = journal_to_write(journal_url)  # refused before the source is looked at
    publisher.settle(tables)  # another count than a log's is refused before anything is made
    # The source is checked and held before the journal is opened (which creates or upgrades
    # it), so a bad source or one another capture holds leaves no journal, change log or
    # registered schema behind; it is prepared (triggers, a slot) only once every destination
    # is open and its schemas are registered, so a destination that fails or a schema change
    # that waits for an operator leaves the source as it was. A stop ends these steps as it
    # ends the capture (`stoppable`): they wait on servers (a journal that does not answer, a
    # registry's lock), and a stop there ended with click's "Aborted!" and status 1, or at
    # once by SIGTERM's default action, which left the source's lock file behind.
    with stoppable("capture interrupted; everything published is durable"):
        schemas = check_change_source(source_url, tables, slot=slot)
        with (
            held_change_source(source_url, tables, slot=slot, log=log) as prepare,
            log.root_made(),
            stores_at(journal) as stores,
        ):
            registry = SchemaRegistry(stores.schemas)
            for schema in schemas:
                registry.register(schema)
            runner = Capture(prepare(), publisher, registry, settings=settings)
            _capture(runner, tables, snapshot=snapshot, follow=follow)


def _capture(runner: Capture, tables: tuple[str, ...], *, snapshot: bool, follow: bool) -> None:
    """Publish the snapshot when asked, then capture until idle (or interrupted with `follow`).

    The summary counts the snapshot's rows too: they are published, so it must not say "no
    changes". Ctrl-C during the snapshot ends the command as during the capture. SIGTERM ends it
    so too (the command's `stoppable`): its default action left the source's lock file behind,
    and the operator without the line. Either only sets a flag while a publish runs (`completing`),
    which the capture looks at between windows: raised into the publish's wait for its file
    writers, the KeyboardInterrupt broke a lock of the thread pool now and then, and the
    capture ended with a RuntimeError and status 1. A snapshot's read (which may wait for a
    lock) still ends at once, and so does the source's new session after a lost one
    (`stops_raising`), which waited out its connect_timeout on a server that does not answer. A
    window's wait for a journal's connection ends soon after the flag is set (`Capture.run`).
    """
    snapshots: dict[str, int] = {}
    skipped = 0
    if snapshot:
        for table in tables:
            current = runner.read_snapshot(table)
            with completing():
                receipt = runner.publisher.publish_rows(current)
                snapshots[table] = receipt.published.get(table, 0)
                skipped += receipt.skipped
                progress(f"snapshot {table}: {counted(snapshots[table], 'row')}")
    with ThrottledProgress() as show, completing() as stop:
        totals = runner.run(
            stop=stop, until_idle=not follow, on_publish=lambda t: show(_capturing(t))
        )
    published = _published(totals)
    if snapshot:
        rows = ", ".join(f"{t}={n:,}" for t, n in sorted(snapshots.items()))
        published = f"a snapshot of {rows}, then {published}"
    click.echo(f"published {published} (skipped {skipped + totals.skipped} already in the log)")


def _capturing(totals: CaptureTotals) -> str:
    """The progress line of a running capture."""
    return f"capturing: published {_published(totals)}, up to {totals.up_to}"


def _published(totals: CaptureTotals) -> str:
    """`table=count, ...` of what a capture published so far."""
    return ", ".join(f"{t}={n:,}" for t, n in sorted(totals.published.items())) or "no changes"
