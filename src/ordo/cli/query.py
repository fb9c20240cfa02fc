"""`ordo query TAG`: read a tag's events, once or following new ones."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from itertools import islice

import click

from ordo.arguments import LARGEST_INTEGER
from ordo.cli.exit_status import interrupted_status
from ordo.cli.integer_range import IntegerRange
from ordo.cli.offset_argument import OFFSET_FORMS, offset_argument
from ordo.cli.options import journal_option, progress, require_journal, settings_from_env
from ordo.errors import StorageAccessError, StorageUnavailableError
from ordo.interrupts import terminable
from ordo.query import EventEnvelope, TagStream
from ordo.reconnection import Reconnection
from ordo.settings import QuerySettings
from ordo.storage.open import events_by_tag_at
from ordo.wording import shown_name

logger = logging.getLogger(__name__)


@click.command()
@journal_option
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    # Not json_option's one document: a stream (a live one never ends) prints as it reads.
    help="Print one JSON object per event, one per line (JSON lines).",
)
@click.argument("tag")
@click.option(
    "--offset",
    default=None,
    help=f"Resume after this offset or from this time ({OFFSET_FORMS}).",
)
@click.option("--live", is_flag=True, help="Keep following new events (Ctrl-C to stop).")
@click.option(
    "--limit",
    type=IntegerRange(min=1, max=LARGEST_INTEGER),
    default=None,
    help="Stop after N events.",
)
def query(
    journal_url: str | None,
    as_json: bool,
    tag: str,
    offset: str | None,
    live: bool,
    limit: int | None,
) -> None:
    """Read the events of TAG in offset order; with --json one JSON object per line.

    Query settings come from ORDO_* variables (ORDO_EVENTUAL_CONSISTENCY_DELAY_MS,
    ORDO_REFRESH_INTERVAL_MS, ...). A query reads only; it never changes the journal. With
    --live it rides out the journal's outages (a server restart) and reads on once it is back.
    """
    # input and settings are checked before the journal is opened
    start = offset_argument(offset, name="--offset")
    query_settings, write_settings = QuerySettings.from_env(os.environ), settings_from_env()
    with events_by_tag_at(
        require_journal(journal_url), settings=query_settings, events_by_tag=write_settings
    ) as queries:
        stream = queries.live(tag, start) if live else queries.current(tag, start)
        delivered = 0
        # SIGTERM (a service manager's stop) ends it as Ctrl-C does, with status 143: by its
        # default action the process died of the signal, unlike every other command it stops.
        with stream, terminable():
            try:
                for envelope in islice(_through_outages(stream) if live else stream, limit):
                    delivered += 1
                    if as_json:
                        click.echo(json.dumps(envelope.to_json_dict(), ensure_ascii=False))
                    else:
                        click.echo(
                            f"{envelope.offset}  {shown_name(envelope.persistence_id)}#"
                            f"{envelope.tag_pid_sequence_nr}  {envelope.payload!r}"
                        )
            except KeyboardInterrupt as interrupt:
                raise click.exceptions.Exit(interrupted_status(interrupt)) from None
    if not delivered:
        progress(_nothing_settled(tag, offset, query_settings))


def _through_outages(stream: TagStream) -> Iterator[EventEnvelope]:
    """The stream's events, read on after the journal was unavailable for a while.

    A live stream raises StorageUnavailableError from next() once storage gave up waiting (on
    PostgreSQL the pool's 30 s) and reads on from where it was when called again, delivering
    each event once and in order: the command calls again after a bounded backoff
    (`Reconnection`) rather than ending a tail at the first restart of the server. It warns once
    per outage, and starts the backoff again, for each new outage the stream reports
    (`unavailable_since_ns`: on a quiet tag next() returns only with an event, not when reads
    succeed again); the stream logs at INFO when it reads again. Ctrl-C during the backoff
    ends the command as anywhere else. The library does not retry by itself: a program may
    rather stop, or report, than wait for ever.

    StorageAccessError is no outage but a server that refuses the URL (a password changed, a
    role that may no longer log in, a dropped database): it ends the command at once, where
    retrying would wait for ever after one WARNING.
    """
    reconnection = Reconnection()
    outage: int | None = None
    while True:
        try:
            envelope = next(stream)
        except StopIteration:
            return
        except StorageAccessError:
            raise
        except StorageUnavailableError as exc:
            if stream.unavailable_since_ns != outage:  # a new one, maybe after reads of nothing
                outage = stream.unavailable_since_ns
                reconnection = Reconnection()
                logger.warning(
                    "live query lost the journal, reading on once it is back: tag=%s error=%s",
                    stream.tag,
                    exc,
                )
            time.sleep(reconnection.failed())
            continue
        yield envelope


def _nothing_settled(tag: str, offset: str | None, settings: QuerySettings) -> str:
    """Why a query printed nothing: nothing after --offset, an empty tag, or too young events.

    After an --offset the tag has events, so "a tag without events reads empty" would mislead.
    """
    delay = settings.eventual_consistency_delay.total_seconds()
    younger = (
        f"events younger than the eventual-consistency delay ({delay:g} s,"
        " ORDO_EVENTUAL_CONSISTENCY_DELAY_MS) are read once they are older"
    )
    if offset is not None:
        return f"no events of tag {tag!r} after --offset {offset} are settled: {younger}"
    return f"no events of tag {tag!r} are settled: a tag without events reads empty, and {younger}"
