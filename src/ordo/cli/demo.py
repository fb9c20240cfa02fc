"""`ordo demo`: the main job on the embedded default (SQLite), end to end with a verdict."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ordo.cli.options import json_option, settings_from_env
from ordo.simulation.workload import Workload
from ordo.simulation.writers import WriterPlan, run_writers
from ordo.storage.location import SQLiteLocation, parse_location
from ordo.storage.open import stores_at
from ordo.tools.verification import check_tag_views

DEFAULT_DEMO_JOURNAL = "sqlite:///.ordo/demo.db"


@click.command()
@click.option(
    "--journal",
    "journal_url",
    default=DEFAULT_DEMO_JOURNAL,
    show_default=True,
    metavar="URL",
    help="Where to write; the default file is recreated on every run.",
)
@click.option(
    "--events",
    default=20_000,
    show_default=True,
    type=click.IntRange(min=1),
    help="Events to write.",
)
@click.option(
    "--writers",
    default=4,
    show_default=True,
    type=click.IntRange(min=1, max=64),
    help="Writer processes.",
)
@click.option(
    "--persistence-ids",
    "persistence_ids",
    default=3_000,
    show_default=True,
    type=click.IntRange(1),
    help="Distinct persistence ids (orders and customers).",
)
@click.option(
    "--seed", default=1, show_default=True, type=int, help="Makes the workload repeatable."
)
@json_option
def demo(
    journal_url: str,
    events: int,
    writers: int,
    persistence_ids: int,
    seed: int,
    as_json: bool,
) -> None:
    """Run the main job: writer processes append a shop's events, then check the tag views."""
    console = Console(stderr=True)
    if journal_url == DEFAULT_DEMO_JOURNAL:
        _remove_sqlite_files(journal_url)
    settings = settings_from_env()
    workload = Workload(events=events, persistence_ids=persistence_ids, writers=writers, seed=seed)
    with Progress(
        TextColumn("writing"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("events"),
        TimeElapsedColumn(),
        console=console,
        transient=as_json,
    ) as progress:
        task = progress.add_task("write", total=events)
        report = run_writers(
            WriterPlan(url=journal_url, workload=workload, settings=settings),
            on_progress=lambda done: progress.update(task, completed=done),
        )
    with stores_at(journal_url) as stores:
        summary = stores.journal.summary()
        tags = stores.tag_views.tags()
        check = check_tag_views(stores.journal, stores.tag_views, settings.bucket_size)
    result = {
        "journal": journal_url,
        "writers": writers,
        "events": report.events,
        "persistence_ids": summary.persistence_ids,
        "events_per_s": round(report.events / report.seconds) if report.seconds else 0,
        "tags": {t.tag: t.events for t in tags},
        "tagged_events": check.tagged_events,
        "tag_view_rows": check.tag_view_rows,
        "missing": len(check.missing),
        "unexpected": len(check.unexpected),
        "duplicated": len(check.duplicated),
        "failed_writers": list(report.failed_writers),
        "clean": check.is_clean and not report.failed_writers,
    }
    if as_json:
        click.echo(json.dumps(result))
    else:
        _render(console, result)
    if not result["clean"]:
        raise click.exceptions.Exit(1)


def _render(console: Console, result: dict[str, object]) -> None:
    table = Table(title="ordo demo", show_header=False)
    for key, value in result.items():
        table.add_row(key, str(value))
    Console().print(table)
    verdict = "[green]tag views match the journal" if result["clean"] else "[red]MISMATCH"
    console.print(verdict)


def _remove_sqlite_files(url: str) -> None:
    location = parse_location(url)
    if isinstance(location, SQLiteLocation):
        for suffix in ("", "-wal", "-shm"):
            Path(f"{location.path}{suffix}").unlink(missing_ok=True)
