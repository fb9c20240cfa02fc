"""`ordo simulate`: prove G1-G3 under skewed clocks and late writes, with a verdict.

rich (the progress bars) is imported only when the command runs: every other `ordo` command
imports this module too, and starts without it.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ordo.cli.exit_status import interrupted_status
from ordo.cli.options import (
    NumberRange,
    int_option,
    print_fields,
    share_option,
    workload_options,
)
from ordo.errors import BucketSizeMismatchError
from ordo.interrupts import terminable
from ordo.settings.loading import LONGEST_MS
from ordo.simulation.run import (
    MAX_SKEW_MS,
    SIMULATION_QUERY_SETTINGS,
    SimulationConfig,
    simulate,
)
from ordo.storage.location import creatable_location
from ordo.time import BucketSize

if TYPE_CHECKING:
    from rich.progress import Progress

_INTERRUPTED = "simulation interrupted: writers and queries stopped, no verdict"


@click.command()
@click.option(
    "--journal",
    "journal_url",
    default=None,
    metavar="URL",
    help="Journal to write (default: a new SQLite file in a temporary directory).",
)
@workload_options(persistence_ids=2_000, seed_help="Makes workload, skews and delays repeatable.")
@int_option(
    "--skew-ms",
    300,
    "Writers' clocks are off by up to this much (at most an hour).",
    minimum=0,
    maximum=MAX_SKEW_MS,
)
# Bounded as every duration is: a delayed write's wait past threading's limit ended the thread
# that applies them, with a traceback, and each delayed event counted as lost.
@int_option(
    "--max-delay-ms", 2_000, "Longest delay of a tag_views write.", minimum=0, maximum=LONGEST_MS
)
@share_option("--delay-probability", 0.05, "Share of tag_views writes that are delayed.")
@share_option(
    "--handovers",
    0.02,
    "Share of appends to an id another writer owns (ids change writers and clocks).",
)
@click.option(
    "--rate",
    default=4_000.0,
    show_default=True,
    type=NumberRange(min=1),
    help="Events per second over all writers.",
)
@int_option("--queries", 4, "Live queries (one per tag, round-robin).")
@int_option("--restarts", 3, "Restarts of each query from its last offset.", minimum=0)
@int_option(
    "--consistency-delay-ms",
    1_000,
    "The queries' eventual_consistency_delay.",
    minimum=0,
    maximum=LONGEST_MS,
)
@int_option("--gap-timeout-ms", 10_000, "The queries' gap_timeout.", minimum=0, maximum=LONGEST_MS)
@click.option(
    "--bucket-size",
    default="minute",
    show_default=True,
    type=click.Choice([b.value for b in BucketSize]),
    help="Time bucket size of the journal.",
)
@click.option(
    "--pubsub/--no-pubsub", default=False, show_default=True, help="Notify queries of tag writes."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with the verdict.")
def simulate_command(
    journal_url: str | None,
    writers: int,
    events: int,
    persistence_ids: int,
    seed: int,
    skew_ms: int,
    max_delay_ms: int,
    delay_probability: float,
    handovers: float,
    rate: float,
    queries: int,
    restarts: int,
    consistency_delay_ms: int,
    gap_timeout_ms: int,
    bucket_size: str,
    pubsub: bool,
    as_json: bool,
) -> None:
    """Run writers with skewed clocks and late writes against live queries, then check them.

    Exits 1 when anything was lost, duplicated or misordered, or a query failed with
    MissingTaggedEventError.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

    if journal_url is not None:
        creatable_location(journal_url)  # a missing folder: refused before anything starts
    with tempfile.TemporaryDirectory(prefix="ordo-simulate-") as scratch:
        config = SimulationConfig(
            journal=journal_url or f"sqlite:///{Path(scratch) / 'simulation.db'}",
            writers=writers,
            events=events,
            persistence_ids=persistence_ids,
            seed=seed,
            skew_ms=skew_ms,
            max_delay_ms=max_delay_ms,
            delay_probability=delay_probability,
            handovers=handovers,
            events_per_s=rate,
            queries=queries,
            restarts=restarts,
            bucket_size=BucketSize(bucket_size),
            query=replace(
                SIMULATION_QUERY_SETTINGS,
                eventual_consistency_delay=timedelta(milliseconds=consistency_delay_ms),
                gap_timeout=timedelta(milliseconds=gap_timeout_ms),
            ),
            pubsub=pubsub,
        )
        console = Console(stderr=True)
        progress = Progress(
            TextColumn("{task.description:<8}"),
            BarColumn(),
            MofNCompleteColumn(),
            console=console,
            transient=as_json,
        )
        tasks: dict[str, TaskID] = {}

        def show(phase: str, done: int, total: int) -> None:
            if not tasks:
                # Started by the first phase: stopping a display prints a line on a console that
                # is no terminal, so a journal refused at the start had its error below an empty
                # line (two lines on stderr).
                progress.start()
            if phase not in tasks:
                tasks[phase] = progress.add_task(phase, total=total)
            progress.update(tasks[phase], completed=done, total=total)

        try:
            with terminable():  # a service manager's stop stops the writers too
                report = simulate(config, on_progress=show)
        except KeyboardInterrupt as interrupt:  # the writer processes and query threads stopped
            _stop(progress)
            click.echo(_INTERRUPTED, err=True)
            raise click.exceptions.Exit(interrupted_status(interrupt)) from None
        except BucketSizeMismatchError as exc:  # the bucket size is this command's flag
            advice = f"run with --bucket-size {exc.recorded}"
            raise exc.advised(advice) from exc
        finally:
            _stop(progress)
    document = report.to_json_dict()
    if as_json:
        click.echo(json.dumps(document))
    else:
        print_fields(document)
        verdict = "no violation of G1-G3" if not report.verdict.violations else "VIOLATIONS"
        console.print(f"[{'green' if not report.verdict.violations else 'red'}]{verdict}")
    if report.verdict.violations:
        raise click.exceptions.Exit(1)


def _stop(progress: Progress) -> None:
    """Stop the display once, if a phase started it (see `show`); a stopped one is left alone."""
    if progress.live.is_started:
        progress.stop()
