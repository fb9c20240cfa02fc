"""`ordo cleanup`: delete persistence ids, tag views before a time, and expire them by TTL."""

from __future__ import annotations

from datetime import timedelta

import click

from ordo.cli.command_group import CommandGroup
from ordo.cli.integer_range import IntegerRange
from ordo.cli.operations_options import (
    OperationRequest,
    change_options,
    guarded_options,
    tag_option,
)
from ordo.cli.options import (
    ThrottledProgress,
    aware_time,
    settings_from_env,
)
from ordo.cli.termination import stoppable
from ordo.settings import EventsByTagSettings
from ordo.settings.loading import LONGEST_MS
from ordo.time import epoch_ms_of
from ordo.tools.cleanup import Cleanup
from ordo.types import PersistenceId, Tag

_ANY_TAG = "Only this tag (default: every tag)."
_FORCE_PAST_LAGGING = (
    "Go on although tracking processors have not read the newest row it deletes (logged as a "
    "warning)."
)
# Ctrl-C, or SIGTERM (`stoppable`: its default action ended the run without saying how far it
# got or what is left), stops the deletion between two batches' transactions.
_INTERRUPTED = (
    "cleanup interrupted: the batches deleted so far stay deleted (see above), the other rows "
    "stay; run it again to delete them"
)


@click.group(cls=CommandGroup)
def cleanup() -> None:
    """Delete events, tag views and metadata; expire old tag views (TTL)."""


@cleanup.command(name="delete")
@guarded_options
@click.argument("persistence_ids", nargs=-1, required=True)
def delete_persistence_ids(request: OperationRequest, persistence_ids: tuple[str, ...]) -> None:
    """Delete PERSISTENCE_IDS: events, tag views, progress, scanning, registration."""
    with request.tool(Cleanup) as tool:
        receipt = tool.delete_persistence_ids(
            [PersistenceId(pid) for pid in persistence_ids],
            force=request.force,
            dry_run=request.dry_run,
        )
    request.render(receipt)


@cleanup.command()
@change_options(_FORCE_PAST_LAGGING)
@tag_option(_ANY_TAG)
@click.argument("time")
def before(request: OperationRequest, tag: Tag | None, time: str) -> None:
    """Delete the tag views rows of events before TIME (ISO-8601 with a zone).

    Refused when a tracking processor has not read the newest row it would delete, unless
    --force.
    """
    moment = aware_time(
        time, name="TIME", unreadable="is not an ISO-8601 time (e.g. 2026-01-31T00:00:00+00:00)"
    )
    cutoff_ms = epoch_ms_of(moment)  # floored: never a row at or after TIME
    with stoppable(_INTERRUPTED), request.tool(Cleanup) as tool, ThrottledProgress() as show:
        receipt = tool.delete_tag_views_before(
            cutoff_ms, tag=tag, force=request.force, dry_run=request.dry_run, on_progress=show
        )
    request.render(receipt)


@cleanup.command()
@change_options(_FORCE_PAST_LAGGING)
@tag_option(_ANY_TAG)
@click.option(
    "--time-to-live-ms",
    type=IntegerRange(min=1, max=LONGEST_MS),  # 0 or less: a usage error naming it
    help="events_by_tag.time_to_live in ms (default: ORDO_TIME_TO_LIVE_MS).",
)
def expire(request: OperationRequest, tag: Tag | None, time_to_live_ms: int | None) -> None:
    """Delete the tag views rows older than events_by_tag.time_to_live, in batches.

    Refused when a tracking processor has not read the newest row it would delete (an
    idle one that read everything is not behind), unless --force.
    """
    if time_to_live_ms is not None:
        time_to_live: timedelta | None = EventsByTagSettings(
            time_to_live=timedelta(milliseconds=time_to_live_ms)
        ).time_to_live
    else:
        time_to_live = settings_from_env().time_to_live
    with stoppable(_INTERRUPTED), request.tool(Cleanup) as tool, ThrottledProgress() as show:
        receipt = tool.expire(
            time_to_live, tag=tag, force=request.force, dry_run=request.dry_run, on_progress=show
        )
    request.render(receipt)
