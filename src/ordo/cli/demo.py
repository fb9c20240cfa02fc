"""`ordo demo`: the main job on the embedded default (SQLite + local Spark), with a verdict.

Spark and rich (the live table) are imported only when the command runs: every other `ordo`
command imports this module too, and starts without them.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ordo.cli.options import master_options, print_fields, workload_options
from ordo.cli.termination import stoppable
from ordo.simulation.workload import Workload
from ordo.storage.location import (
    SQLiteLocation,
    creatable_location,
    create_folders,
    parse_location,
    redacted_url,
)
from ordo.storage.open import require_empty_journal

if TYPE_CHECKING:
    from rich.console import Console
    from rich.live import Live
    from rich.table import Table

DEFAULT_DEMO_JOURNAL = "sqlite:///.ordo/demo.db"
_APP = "ordo-demo"


@click.command()
@click.option(
    "--journal",
    "journal_url",
    default=DEFAULT_DEMO_JOURNAL,
    show_default=True,
    metavar="URL",
    help="Where to write; the default file is recreated on every run.",
)
@workload_options(persistence_ids=3_000, seed_help="Makes the workload repeatable.")
@master_options("local[*]")
@click.option("--json", "as_json", is_flag=True, help="End with one JSON object (the verdict).")
def demo(
    journal_url: str,
    events: int,
    writers: int,
    persistence_ids: int,
    seed: int,
    master: str,
    executor_timeout_ms: int,
    as_json: bool,
) -> None:
    """Run the main job: writers append a shop's events while Spark projects them, then check.

    A streaming projection of the tag `order` in four segments counts each order's events,
    exactly once and in order; one segment is split half-way through the run. The verdict
    compares the read model and the tag views with the journal. On SQLite the read model's
    changes are captured as well and materialized on Spark into full-row change messages
    and a copy of the table, which the verdict checks too (CDC, G6).
    """
    left = (
        "demo interrupted: writers and projection stopped, no verdict; "
        f"{redacted_url(journal_url)} "  # a URL's password is no message's
        "holds what was written"
    )
    with stoppable(left):  # from the start: importing pyspark and checking the journal take time
        from rich.console import Console

        from ordo.spark.demo import Progress, run_demo
        from ordo.spark.interruption import run_job
        from ordo.spark.job_session import job_session
        from ordo.spark.query_failure import query_failures

        console = Console(stderr=True)
        if journal_url == DEFAULT_DEMO_JOURNAL:
            _remove_sqlite_files(journal_url)
        _check_journal(journal_url)  # before Spark, which takes seconds to start (or to fail)
        with (
            query_failures("demo"),
            job_session(
                master=master,
                app_name=_APP,
                executor_timeout_ms=executor_timeout_ms,
                announce=console.out,  # not print, which read markup in ORDO_SPARK_LOG's path
            ) as spark,
            tempfile.TemporaryDirectory(
                prefix="ordo-demo-", ignore_cleanup_errors=True
            ) as work_dir,
            _live_display(console, transient=as_json) as live,
        ):
            # the demo's own folder, made once Spark started
            if journal_url == DEFAULT_DEMO_JOURNAL:
                create_folders(DEFAULT_DEMO_JOURNAL)

            def show(progress: Progress) -> None:
                live.update(_view(progress))

            workload = Workload(
                events=events, persistence_ids=persistence_ids, writers=writers, seed=seed
            )
            report = run_job(
                spark,
                lambda: run_demo(
                    spark,
                    journal=journal_url,
                    workload=workload,
                    work_dir=Path(work_dir),
                    on_progress=show,
                ),
            )
    result = report.to_json_dict()
    if as_json:
        click.echo(json.dumps(result))
    else:
        print_fields(result)
        verdict = (
            "[green]clean: nothing lost, duplicated or misordered"
            if report.is_clean
            else "[red]NOT CLEAN"
        )
        console.print(verdict)
    if not report.is_clean:
        raise click.exceptions.Exit(1)


@contextmanager
def _live_display(console: Console, *, transient: bool) -> Iterator[Live]:
    """The run's live table on `console`, its last line ended however the run ends.

    Rich ends the display's last line only on a terminal: on a pipe or a file the verdict, or
    the line of an interrupted run, was glued to the table's bottom border.
    """
    from rich.live import Live

    try:
        with Live(console=console, refresh_per_second=4, transient=transient) as live:
            yield live
    finally:
        if not transient and not console.is_terminal:
            console.line()


def _view(progress: object) -> Table:
    from rich.table import Table

    from ordo.spark.demo import Progress

    assert isinstance(progress, Progress)  # noqa: S101 - only run_demo calls back
    table = Table(title="ordo demo: writers → SQLite journal → Spark projection", show_header=False)
    if progress.writing_since is None:
        table.add_row("events written", "0  (Spark's workers are starting)")
    else:
        rate = progress.written / max(time.monotonic() - progress.writing_since, 0.001)
        table.add_row("events written", f"{progress.written:,}  ({rate:,.0f}/s)")
    table.add_row("order events projected", f"{progress.projected:,} of {progress.tagged:,}")
    table.add_row("micro-batches", f"{progress.batches}  (last {progress.batch_ms} ms)")
    for segment, lag in sorted(progress.segments.items()):
        table.add_row(f"lag of {segment}", f"{lag:,} events")
    if progress.split:
        table.add_row("split", progress.split)
    return table


def _check_journal(url: str) -> None:
    """Refuse a journal the demo cannot use, creating nothing: run_demo creates it.

    An unreachable or non-empty journal fails here, before Spark starts. Nothing is created
    here but by the run, once Spark has started: a Spark that did not start (a misspelt
    --master) left ordo's tables behind, in a new SQLite file or in the PostgreSQL schema or
    SQLite file named. The folder of an SQLite journal must exist (MissingFolderError, as
    opening it would say once Spark had started), except the default's: `.ordo` is the demo's
    own, which `demo` creates.
    """
    if url != DEFAULT_DEMO_JOURNAL:
        creatable_location(url)
    from ordo.spark.demo import BUCKET_SIZE

    # A newer schema failed once Spark had started; so did another bucket size than run_demo's.
    require_empty_journal(url, run="the demo", bucket_size=BUCKET_SIZE)


def _remove_sqlite_files(url: str) -> None:
    location = parse_location(url)
    if isinstance(location, SQLiteLocation):
        for suffix in ("", "-wal", "-shm"):
            Path(f"{location.path}{suffix}").unlink(missing_ok=True)
