"""Journal commands: init, append, events, tags, info."""

from __future__ import annotations

from typing import TextIO

import click

from ordo.cli.options import (
    SEQUENCE_NR,
    chosen_bucket_size,
    journal_option,
    journal_to_write,
    json_option,
    print_fields,
    print_json,
    read_only_stores,
    require_journal,
    settings_from_env,
)
from ordo.cli.termination import stoppable
from ordo.errors import AppendStoppedError, OrdoError
from ordo.interrupts import stop_flag
from ordo.journal import AppendReceipt, Journal
from ordo.journal.event_lines import parse_event_lines
from ordo.storage.open import init_storage, open_journal
from ordo.time import format_epoch_ms
from ordo.wording import counted, shown_name

_TAG_LIST = ",#[]"
"""The punctuation of `events`' tag list `[a#1,b#2]`: a tag holding one is quoted (shown_name)."""


@click.command()
@journal_option
@json_option
def init(journal_url: str | None, as_json: bool) -> None:
    """Create or upgrade the journal's schema (idempotent).

    With ORDO_BUCKET_SIZE set, also record that bucket size (refused when the journal recorded
    another); without, the first write records the one it is given.
    """
    url = require_journal(journal_url)
    receipt = init_storage(url, bucket_size=chosen_bucket_size())
    if as_json:
        print_json(
            {
                "previous_version": receipt.previous_version,
                "version": receipt.version,
                "previous_bucket_size": receipt.previous_bucket_size,
                "bucket_size": receipt.bucket_size,
            }
        )
        return
    schema = (
        f"schema at version {receipt.version} (was {receipt.previous_version})"
        if receipt.version != receipt.previous_version
        else f"schema already at version {receipt.version}"
    )
    if receipt.is_bucket_size_recorded:
        click.echo(f"{schema}; bucket size {receipt.bucket_size} recorded")
    else:
        click.echo(schema if receipt.is_changed else f"{schema}; nothing to do")


@click.command()
@journal_option
@json_option
@click.argument("source", type=click.File("r", encoding="utf-8"), default="-", metavar="[FILE]")
def append(journal_url: str | None, as_json: bool, source: TextIO) -> None:
    """Append events from JSON lines (a FILE, or stdin when omitted).

    One event per line: {"persistence_id": "...", "payload": {...}, "tags": ["..."]} with
    optional "manifest", "metadata" and "expected_sequence_nr". Every line is validated before
    anything is written; each persistence id's run of lines is one atomic append, and a conflict
    stops the run there, naming the line and what was already appended.
    """
    url = journal_to_write(journal_url)
    receipts: list[AppendReceipt] = []
    with stoppable(_APPEND_INTERRUPTED):
        requests = parse_event_lines(
            source, source="stdin" if source.name == "<stdin>" else source.name
        )
        # Ctrl-C or SIGTERM while the lines are read or the journal opens ends the command
        # there: nothing is written yet, and the writer lease is taken by the first append.
        # Opened within the flag, a connect to a PostgreSQL server that does not answer held
        # the stop for its connect_timeout (10 s), then failed as an outage (status 1).
        journal = open_journal(url, settings=settings_from_env())
        # Then Ctrl-C and a service manager's SIGTERM only set the flag, looked at between
        # appends: no interrupt lands inside a write, and the journal closes as after any run,
        # releasing its writer lease (a kill left it to refuse reconciling the ids appended to
        # until it expired).
        with stop_flag() as stop, journal:
            for request in requests:
                if stop.is_set():
                    raise stop.interrupt()
                try:
                    receipts.append(
                        journal.append(
                            request.persistence_id,
                            request.events,
                            expected_sequence_nr=request.expected_sequence_nr,
                        )
                    )
                except OrdoError as exc:
                    raise AppendStoppedError(
                        line=request.line, appended_events=_events(receipts), cause=exc
                    ) from exc
    count = _events(receipts)
    if as_json:
        print_json(
            {
                "events": count,
                "appends": [
                    {
                        "persistence_id": r.persistence_id,
                        "first_sequence_nr": r.first_sequence_nr,
                        "last_sequence_nr": r.last_sequence_nr,
                    }
                    for r in receipts
                ],
            }
        )
    else:
        pids = len({r.persistence_id for r in receipts})
        click.echo(f"appended {counted(count, 'event')} to {counted(pids, 'persistence id')}")


_APPEND_INTERRUPTED = (
    "append interrupted: the lines appended so far stay, each persistence id's run whole"
)


def _events(receipts: list[AppendReceipt]) -> int:
    return sum(r.last_sequence_nr - r.first_sequence_nr + 1 for r in receipts)


@click.command()
@journal_option
@json_option
@click.argument("persistence_id")
@click.option(
    "--from",
    "from_sequence_nr",
    type=SEQUENCE_NR,
    default=1,
    show_default=True,
    help="First sequence nr.",
)
@click.option("--to", "to_sequence_nr", type=SEQUENCE_NR, default=None, help="Last sequence nr.")
def events(
    journal_url: str | None,
    as_json: bool,
    persistence_id: str,
    from_sequence_nr: int,
    to_sequence_nr: int | None,
) -> None:
    """Replay the events of PERSISTENCE_ID (inclusive range --from..--to)."""
    if to_sequence_nr is not None and to_sequence_nr < from_sequence_nr:
        # An inverted range is a mistake in the command, not a persistence id without events.
        msg = f"{to_sequence_nr} is before --from {from_sequence_nr}"
        raise click.BadParameter(msg, ctx=click.get_current_context(), param_hint="'--to'")
    settings = settings_from_env()  # a bad ORDO_* setting is named before the journal is opened
    with read_only_stores(journal_url) as stores:
        journal = Journal(stores.journal, stores.tag_views, settings=settings)
        replayed = list(
            journal.replay(
                persistence_id, from_sequence_nr=from_sequence_nr, to_sequence_nr=to_sequence_nr
            )
        )
    if as_json:
        print_json([e.to_json_dict() for e in replayed])
        return
    for e in replayed:
        tagged = ",".join(
            f"{shown_name(tag, separators=_TAG_LIST)}#{nr}" for tag, nr in sorted(e.tags.items())
        )
        click.echo(f"{e.sequence_nr:>6}  {e.timestamp.isoformat()}  [{tagged}]  {e.payload!r}")
    if not replayed:
        click.echo(f"no events for persistence id {persistence_id!r}", err=True)


@click.command()
@journal_option
@json_option
def tags(journal_url: str | None, as_json: bool) -> None:
    """List the tags of the tag views with their event counts (a full scan)."""
    with read_only_stores(journal_url) as stores:
        summaries = stores.tag_views.tags()
    if as_json:
        print_json(
            [
                {
                    "tag": s.tag,
                    "events": s.events,
                    "persistence_ids": s.persistence_ids,
                    "buckets": s.buckets,
                    "first_bucket": format_epoch_ms(s.first_bucket),
                    "last_bucket": format_epoch_ms(s.last_bucket),
                }
                for s in summaries
            ]
        )
        return
    for s in summaries:
        counts = (
            counted(s.events, "event"),
            counted(s.persistence_ids, "persistence id"),
            counted(s.buckets, "bucket"),
        )
        click.echo("\t".join((shown_name(s.tag), *counts)))
    if not summaries:
        click.echo("no tagged events", err=True)


_UNRECORDED_BUCKET_SIZE = (
    "not recorded yet (set by the first write, or by `ordo init` with ORDO_BUCKET_SIZE)"
)


@click.command()
@journal_option
@json_option
def info(journal_url: str | None, as_json: bool) -> None:
    """Summarize the journal: events, persistence ids, bucket size, tags."""
    with read_only_stores(journal_url) as stores:
        summary = stores.journal.summary()
        summaries = stores.tag_views.tags()
    document = {
        "backend": stores.backend,
        "schema_version": summary.schema_version,
        "bucket_size": summary.bucket_size,
        "journal_id": summary.journal_id,
        "events": summary.events,
        "persistence_ids": summary.persistence_ids,
        "tags": {s.tag: s.events for s in summaries},
    }
    if as_json:
        print_json(document)
        return
    if summary.bucket_size is None:  # JSON's null read as a value in the text
        document["bucket_size"] = _UNRECORDED_BUCKET_SIZE
    print_fields(document)
