"""`ordo cdc`: capture, ingest, materialize, schemas, status and the replica simulation."""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from ordo.arguments import LARGEST_INTEGER
from ordo.cdc import Publisher, SchemaRegistry
from ordo.cdc.capture import Capture, CaptureTotals
from ordo.cdc.ingest import ingest as publish_mutations
from ordo.cdc.ingest import parse_mutation_lines
from ordo.cli.cdc_schemas import schemas
from ordo.cli.options import (
    NUMBER,
    ThrottledProgress,
    counted,
    existing_journal,
    int_option,
    interruptible,
    journal_option,
    journal_to_write,
    json_option,
    master_option,
    print_fields,
    print_json,
    progress,
    require_journal,
)
from ordo.cli.streaming import start_query, streaming_job, wait_for
from ordo.errors import ConfigurationError
from ordo.settings import CaptureSettings
from ordo.storage.change_sources import DEFAULT_SLOT, change_source_at, check_change_source
from ordo.storage.open import stores_at
from ordo.storage.parquet import ParquetChangeLog
from ordo.storage.parquet.batch_files import BatchListing

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_CHANGE_LOG = ".ordo/changelog"


def change_log_option(func: F) -> F:
    """--change-log DIR, also from ORDO_CDC_CHANGE_LOG."""
    return click.option(
        "--change-log",
        "change_log",
        default=DEFAULT_CHANGE_LOG,
        show_default=True,
        envvar="ORDO_CDC_CHANGE_LOG",
        show_envvar=True,
        type=click.Path(file_okay=False, path_type=Path),
        help="Root directory of the partitioned Parquet change logs (one per table).",
    )(func)


def require_named_change_log(change_log: Path) -> None:
    """Refuse a change log directory the user named (option or variable) that is not there.

    A command that only reads would show a misspelt --change-log as "no change logs", as if
    nothing were captured yet; the default directory may well not exist yet (no capture ran),
    so only a named one is checked. `ordo cdc materialize` refuses a missing one as well.
    """
    source = click.get_current_context().get_parameter_source("change_log")
    if source in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP):
        return
    if not change_log.is_dir():
        named = "ORDO_CDC_CHANGE_LOG" if source is ParameterSource.ENVIRONMENT else "--change-log"
        msg = f"no change log directory {change_log}: check {named}"
        raise ConfigurationError(msg)


partitions_option = click.option(
    "--partitions",
    type=click.IntRange(min=1, max=LARGEST_INTEGER),
    default=None,
    help=(
        "Partitions of each table's change log, fixed by its first publish (another count is "
        "refused).  [default: the log's own count; 8 for a new log]"
    ),
)
"""--partitions: None when not given, so that the publisher follows each table's log."""


def source_status_options(func: F) -> F:
    """--source URL, --table and --slot: a CDC source whose lag a status shows."""
    func = click.option(
        "--slot", default=DEFAULT_SLOT, show_default=True, help="PostgreSQL slot of --source."
    )(func)
    func = click.option("--table", "tables", multiple=True, help="Captured tables of --source.")(
        func
    )
    return click.option(
        "--source", "source_url", default=None, help="Also show this CDC source's capture lag."
    )(func)


@click.group()
def cdc() -> None:
    """Change data capture: source changes -> keyed change log -> full-row change messages."""


cdc.add_command(schemas)


@cdc.command()
@journal_option
@change_log_option
@click.argument("source_url")
@click.option("--table", "tables", multiple=True, required=True, help="A table to capture.")
@click.option("--slot", default=DEFAULT_SLOT, show_default=True, help="PostgreSQL slot name.")
@click.option("--snapshot", is_flag=True, help="First publish every captured table's rows.")
@click.option("--follow", is_flag=True, help="Keep capturing until interrupted.")
@partitions_option
@int_option("--max-changes", 1000, "Changes per window; a full window is published at once.")
@int_option("--flush-interval-ms", 1000, "Publish a partly filled window at least this often.")
@click.option(
    "--reconnect-timeout-ms",
    type=click.IntRange(min=0, max=LARGEST_INTEGER),
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
    settings = CaptureSettings(
        max_changes=max_changes,
        flush_interval=timedelta(milliseconds=flush_interval_ms),
        reconnect_timeout=timedelta(milliseconds=reconnect_timeout_ms),
    )
    log = ParquetChangeLog(change_log)
    publisher = Publisher(log, partitions=partitions)
    journal = journal_to_write(journal_url)  # refused before the source is looked at
    publisher.settle(tables)  # another count than a log's is refused before anything is made
    # The source is checked before the journal is opened (which creates or upgrades it), so a
    # bad source leaves no journal behind; it is prepared (triggers, a slot) only once every
    # destination is open and its schemas are registered, so a destination that fails or a
    # schema change that waits for an operator leaves the source as it was.
    schemas = check_change_source(source_url, tables, slot=slot)
    with log.root_made(), stores_at(journal) as stores:
        registry = SchemaRegistry(stores.schemas)
        for schema in schemas:
            registry.register(schema)
        with change_source_at(source_url, tables, slot=slot) as source:
            runner = Capture(source, publisher, registry, settings=settings)
            _capture(runner, tables, snapshot=snapshot, follow=follow)


def _capture(runner: Capture, tables: tuple[str, ...], *, snapshot: bool, follow: bool) -> None:
    """Publish the snapshot when asked, then capture until idle (or interrupted with `follow`).

    The summary counts the snapshot's rows too: they are published, so it must not say "no
    changes". Ctrl-C during the snapshot ends the command as during the capture.
    """
    snapshots: dict[str, int] = {}
    skipped = 0
    with interruptible("capture interrupted; everything published is durable"):
        if snapshot:
            for table in tables:
                receipt = runner.publish_snapshot(table)
                snapshots[table] = receipt.published.get(table, 0)
                skipped += receipt.skipped
                progress(f"snapshot {table}: {counted(snapshots[table], 'row')}")
        with ThrottledProgress() as show:
            totals = runner.run(until_idle=not follow, on_publish=lambda t: show(_capturing(t)))
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


@cdc.command()
@journal_option
@change_log_option
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@partitions_option
def ingest(
    journal_url: str | None, change_log: Path, files: tuple[Path, ...], partitions: int | None
) -> None:
    """Publish raw mutations (JSON lines, docs/cdc.md) from FILES or stdin into the change log.

    Every line of every input is checked first, and every table's schema looked up: a malformed
    line, or a table with no registered schema (`ordo cdc schemas register`), is reported with
    its file and line number and nothing of any input is published.
    """
    url = existing_journal(journal_url)
    inputs = [parse_mutation_lines(str(f), f.read_bytes()) for f in files] or [
        parse_mutation_lines("stdin", sys.stdin.buffer.read())
    ]
    publisher = Publisher(ParquetChangeLog(change_log), partitions=partitions)
    with stores_at(url) as stores:
        receipts = publish_mutations(inputs, publisher, SchemaRegistry(stores.schemas))
    for lines, receipt in zip(inputs, receipts, strict=True):
        published = sum(receipt.published.values())
        click.echo(f"{lines.source}: published {published}, skipped {receipt.skipped}")


@cdc.command()
@journal_option
@change_log_option
@json_option
@source_status_options
def status(
    journal_url: str | None,
    change_log: Path,
    as_json: bool,
    source_url: str | None,
    tables: tuple[str, ...],
    slot: str,
) -> None:
    """Show change logs (partitions, last positions), schemas, materializers and capture lag."""
    from rich.console import Console

    from ordo.cli.cdc_status import cdc_table
    from ordo.tools.status import cdc_status

    require_named_change_log(change_log)
    found = cdc_status(
        require_journal(journal_url), change_log, source_url=source_url, tables=tables, slot=slot
    )
    if as_json:
        print_json(found.to_json())
    else:
        Console().print(cdc_table(found))


@cdc.command()
@journal_option
@change_log_option
@master_option("local[2]")
@click.argument("table")
@click.option(
    "--checkpoint",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Spark checkpoint directory (state and progress); keep it to restart where it stopped.",
)
@click.option(
    "--name",
    default=None,
    help="Materializer name (default: the table's name); it stays with its --checkpoint.",
)
@click.option(
    "--messages",
    "messages_path",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Also write the messages as Parquet here (one directory per micro-batch).",
)
@click.option(
    "--target-table", default="", help="Materialized table (default: TABLE_materialized)."
)
@click.option("--follow", is_flag=True, help="Keep materializing new changes until interrupted.")
def materialize(
    journal_url: str | None,
    change_log: Path,
    master: str,
    table: str,
    checkpoint: Path,
    name: str | None,
    messages_path: Path | None,
    target_table: str,
    follow: bool,
) -> None:
    """Turn TABLE's change log into full-row messages and keep the materialized table.

    Messages go to the `cdc_messages` table of --journal (and to --messages as Parquet);
    the table TABLE_materialized follows them. Without --follow it stops once the change
    log is consumed. Restarting with the same --checkpoint continues exactly where it stopped;
    another checkpoint than the one a materializer (--name) was run from is refused.
    Changes that do not fit their schema, or cannot be read, go to CHECKPOINT/dead_letters:
    a warning on stderr says how many this run sent there.
    """
    from ordo.spark.checkpoint import checkpoint_lock
    from ordo.spark.job_session import job_session
    from ordo.spark.materializer import MaterializerSpec, require_checkpoint, require_schema
    from ordo.spark.materializer import materialize as start_materializer

    spec = MaterializerSpec(
        name=name or table,
        table=table,
        change_log=str(change_log),
        sink=existing_journal(journal_url),
        messages_path=None if messages_path is None else str(messages_path),
        target_table=target_table,
    )
    require_schema(spec)  # before Spark starts, as are the change log's and checkpoint's checks
    _require_change_log(change_log, table, follow=follow)
    require_checkpoint(spec, str(checkpoint))
    dead_letters = BatchListing.of(spec.dead_letters_at(str(checkpoint)))
    app_name = f"ordo-materializer-{spec.name}"
    label = f"materializer {spec.name!r}"
    with (
        streaming_job(label),
        checkpoint_lock(str(checkpoint), label),  # a second copy: refused before Spark starts
        job_session(master=master, app_name=app_name, announce=progress) as spark,
    ):
        query = start_query(
            spark,
            label,
            lambda: start_materializer(
                spark,
                spec,
                checkpoint=str(checkpoint),
                available_now=not follow,
                processing_time="1 second" if follow else None,
            ),
        )
        try:
            wait_for(query, label)
        finally:  # interrupted or failed too: what went to the dead letters stays there
            _warn_of_dead_letters(dead_letters)
    with stores_at(spec.sink) as stores:
        done = [p for p in stores.change_sink.progress() if p.materializer == spec.name]
        has_table = stores.change_sink.has_table(spec.target_table)
    stored = done[0].messages if done else 0
    table_state = (
        f"table {spec.target_table}"
        if has_table
        else f"no table {spec.target_table} (no change was applied)"
    )
    click.echo(f"materializer {spec.name!r}: {counted(stored, 'message')} stored; {table_state}")


def _warn_of_dead_letters(listing: BatchListing) -> None:
    """A warning on stderr when the run sent rows to the dead letters (they are easy to miss).

    Counts the rows of the batch files written under the dead letters' directory since
    `listing`: a restarted run that replays a batch counts its rows again.
    """
    rows = listing.rows_written_since()
    if rows:
        progress(
            f"warning: {counted(rows, 'change')} went to the dead letters in {listing.root} "
            "(they do not fit their schema, or cannot be read; see dead_letter_reason)"
        )


def _require_change_log(change_log: Path, table: str, *, follow: bool) -> None:
    """Refuse a change log that is not there (a misspelt --change-log would materialize nothing).

    With --follow only the root must exist: the table's directory comes with its first publish.
    """
    if follow and not change_log.is_dir():
        msg = f"no change log directory {change_log}: check --change-log"
        raise ConfigurationError(msg)
    if not follow and not (change_log / table).is_dir():
        msg = (
            f"no change log of table {table!r} in {change_log}: check --change-log, or capture "
            "or ingest the table first"
        )
        raise ConfigurationError(msg)


@cdc.command()
@json_option
@master_option("local[2]")
@int_option("--replicas", 3, "Replicas delivering each write.", maximum=16)
@int_option("--keys", 1_000, "Partition keys written.")
@int_option("--mutations", 20_000, "Client writes.")
@click.option("--seed", type=NUMBER, default=1, show_default=True, help="Makes the run repeatable.")
def simulate(
    as_json: bool, master: str, replicas: int, keys: int, mutations: int, seed: int
) -> None:
    """Check G6 with N replicas delivering a workload's writes duplicated, reordered, partial.

    The deliveries go through the change log and the Spark materializer; the checker verifies
    that each message's `before` is the previous `after` of its key, that the materialized
    table equals the fold of the messages and the last-write-wins merge of every mutation, and
    that every message conforms to its schema. Exit status 1 when any check fails.
    """
    from ordo.simulation.cdc import ReplicaWorkload
    from ordo.spark.cdc_simulation import run_cdc_simulation
    from ordo.spark.interruption import run_job
    from ordo.spark.job_session import job_session
    from ordo.spark.query_failure import query_failures

    workload = ReplicaWorkload(mutations=mutations, keys=keys, replicas=replicas, seed=seed)
    with (
        interruptible("cdc simulate interrupted: the materializer stopped, no verdict"),
        query_failures("cdc simulate"),
        job_session(master=master, app_name="ordo-cdc-simulate", announce=progress) as spark,
        tempfile.TemporaryDirectory(prefix="ordo-cdc-simulate-") as work_dir,
    ):
        result = run_job(
            spark, lambda: run_cdc_simulation(spark, workload, work_dir=Path(work_dir))
        )
    document = result.to_json()
    if as_json:
        click.echo(json.dumps(document))
    else:
        print_fields(document)
    if not result.report.is_clean:
        raise click.exceptions.Exit(1)
