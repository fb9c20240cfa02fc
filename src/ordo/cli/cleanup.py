"""`ordo cleanup`: delete persistence ids, tag views before a time, and expire them by TTL."""

from __future__ import annotations

from datetime import datetime, timedelta

import click

from ordo.cli.operations_options import (
    dry_run_option,
    force_option,
    lease_timeout_option,
    operations_settings,
    progress,
    render,
)
from ordo.cli.options import journal_option, json_option, require_journal, settings_from_env
from ordo.errors import ConfigurationError
from ordo.settings import EventsByTagSettings
from ordo.storage.operations import operations_at
from ordo.tools.cleanup import Cleanup
from ordo.types import PersistenceId, Tag


@click.group()
def cleanup() -> None:
    """Delete events, tag views and metadata; expire old tag views (TTL)."""


@cleanup.command(name="delete")
@journal_option
@json_option
@dry_run_option
@force_option
@lease_timeout_option
@click.argument("persistence_ids", nargs=-1, required=True)
def delete_persistence_ids(
    journal_url: str | None,
    as_json: bool,
    dry_run: bool,
    force: bool,
    lease_timeout_ms: int | None,
    persistence_ids: tuple[str, ...],
) -> None:
    """Delete PERSISTENCE_IDS: events, tag views, progress, scanning, registration."""
    settings = operations_settings(lease_timeout_ms)
    with operations_at(require_journal(journal_url)) as stores:
        receipt = Cleanup.of(stores, settings=settings).delete_persistence_ids(
            [PersistenceId(pid) for pid in persistence_ids], force=force, dry_run=dry_run
        )
    render(receipt, as_json=as_json)


@cleanup.command()
@journal_option
@json_option
@dry_run_option
@force_option
@click.option("--tag", help="Only this tag (default: every tag).")
@click.argument("time")
def before(
    journal_url: str | None,
    as_json: bool,
    dry_run: bool,
    force: bool,
    tag: str | None,
    time: str,
) -> None:
    """Delete the tag views rows of events before TIME (ISO-8601 with a zone).

    Refused when a tracking processor has not read that far, unless --force.
    """
    try:
        moment = datetime.fromisoformat(time)
    except ValueError as exc:
        msg = f"TIME {time!r} is not an ISO-8601 time (e.g. 2026-01-31T00:00:00+00:00)"
        raise ConfigurationError(msg) from exc
    if moment.tzinfo is None:
        msg = f"TIME {time!r} has no zone; add one (e.g. +00:00)"
        raise ConfigurationError(msg)
    cutoff_ms = int(moment.timestamp() * 1000)
    with operations_at(require_journal(journal_url)) as stores:
        receipt = Cleanup.of(stores, settings=operations_settings(None)).delete_tag_views_before(
            cutoff_ms,
            tag=None if tag is None else Tag(tag),
            force=force,
            dry_run=dry_run,
            on_progress=progress,
        )
    render(receipt, as_json=as_json)


@cleanup.command()
@journal_option
@json_option
@dry_run_option
@force_option
@click.option("--tag", help="Only this tag (default: every tag).")
@click.option(
    "--time-to-live-ms",
    type=int,
    help="events_by_tag.time_to_live in ms (default: ORDO_TIME_TO_LIVE_MS).",
)
def expire(
    journal_url: str | None,
    as_json: bool,
    dry_run: bool,
    force: bool,
    tag: str | None,
    time_to_live_ms: int | None,
) -> None:
    """Delete the tag views rows older than events_by_tag.time_to_live, in batches.

    Refused when the TTL is shorter than a tracking processor's lag, unless --force.
    """
    if time_to_live_ms is not None:
        time_to_live: timedelta | None = EventsByTagSettings(
            time_to_live=timedelta(milliseconds=time_to_live_ms)
        ).time_to_live
    else:
        time_to_live = settings_from_env().time_to_live
    with operations_at(require_journal(journal_url)) as stores:
        receipt = Cleanup.of(stores, settings=operations_settings(None)).expire(
            time_to_live,
            tag=None if tag is None else Tag(tag),
            force=force,
            dry_run=dry_run,
            on_progress=progress,
        )
    render(receipt, as_json=as_json)
