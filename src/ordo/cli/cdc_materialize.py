"""`ordo cdc materialize`: a table's change log into full-row messages and its materialized table.

Spark, and pyarrow for the change log, are imported only when the command runs: the other
commands start without them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from ordo.cli.cdc_options import change_log_option
from ordo.cli.options import (
    existing_journal,
    journal_option,
    master_options,
    non_empty,
    progress,
)
from ordo.cli.streaming import start_query, streaming_job, streaming_session, wait_for
from ordo.errors import ConfigurationError
from ordo.storage.open import stores_at
from ordo.wording import counted

if TYPE_CHECKING:
    from ordo.storage.parquet.batch_files import BatchListing


@click.command()
@journal_option
@change_log_option
@master_options("local[2]")
@click.argument("table", callback=non_empty)
@click.option(
    "--checkpoint",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Spark checkpoint directory (state and progress); keep it to restart where it stopped.",
)
@click.option(
    "--name",
    default=None,
    callback=non_empty,
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
    executor_timeout_ms: int,
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
    label = f"materializer {(name or table)!r}"  # the spec's name
    with streaming_job(label):  # from the start: importing pyspark and the checks take seconds
        from ordo.spark.materializer import MaterializerSpec, require_checkpoint, require_schema
        from ordo.spark.materializer import materialize as start_materializer
        from ordo.storage.parquet.batch_files import BatchListing

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
        with streaming_session(
            label,
            str(checkpoint),
            master=master,
            app_name=app_name,
            executor_timeout_ms=executor_timeout_ms,
        ) as spark:
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
    A folder of the log this process may not list is StorageAccessError here, before Spark
    starts, rather than the query's failure once it has (or the bare PermissionError).
    """
    from ordo.storage.parquet import ParquetChangeLog

    log = ParquetChangeLog(change_log)
    tables = log.tables()
    log.files(table)  # lists the table's partition folders
    if follow and not change_log.is_dir():
        msg = f"no change log directory {change_log}: check --change-log"
        raise ConfigurationError(msg)
    if not follow and table not in tables:
        msg = (
            f"no change log of table {table!r} in {change_log}: check --change-log, or capture "
            "or ingest the table first"
        )
        raise ConfigurationError(msg)
