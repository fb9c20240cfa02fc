"""`ordo processors`: status of tracking processors, and split, merge, release and reset."""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextlib import ExitStack, closing
from dataclasses import asdict, fields
from typing import Literal

import click

from ordo.cli.command_group import CommandGroup
from ordo.cli.number_arguments import NumberArgumentsCommand
from ordo.cli.offset_argument import OFFSET_FORMS, offset_argument
from ordo.cli.options import (
    SEGMENT_ID,
    beyond_token,
    claim_age,
    claim_timeout_ms,
    existing_journal,
    journal_option,
    json_option,
    pending_request,
    print_json,
    read_only_stores,
    shown_token,
    without_tokens,
)
from ordo.errors import SchemaVersionError
from ordo.processing.control import (
    ControlReceipt,
    check_reset_processor,
    check_segment_change,
    merge_segment,
    release_segment,
    reset_processor,
    split_segment,
)
from ordo.processing.ports import TokenStore
from ordo.processing.segment_request import SegmentAction
from ordo.processing.token import TrackingToken
from ordo.query.offset import refuse_future
from ordo.storage.open import existing_stores_at, open_existing_stores, stores_at
from ordo.storage.stores import Stores
from ordo.time import TimeUUID
from ordo.tools.status import SegmentStatus
from ordo.wording import shown_name


@click.group(cls=CommandGroup)
def processors() -> None:
    """Inspect and steer tracking processors through their token store."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _reset_token(offset: str | None) -> TrackingToken:
    """The token `reset --to OFFSET` moves to, refused before the sink or journal is opened.

    OFFSET takes what `query --offset` takes. A token is the last offset processed
    (inclusive), and a time's offset is the smallest TimeUUID at that instant: the events
    written from then on are replayed, one written at that very instant included. An offset
    in the future (FutureOffsetError) was refused by reset_processor only once both were open
    for writing: an older journal was upgraded, and a file in rollback mode switched to WAL, by
    a command that then changed nothing.
    """
    start = offset_argument(offset, name="--to")
    if not isinstance(start, TimeUUID):
        return TrackingToken(None)
    refuse_future(start, now_ns=time.time_ns())
    return TrackingToken(start)


@processors.command()
@journal_option
@json_option
@click.argument("processor", required=False)
def status(journal_url: str | None, as_json: bool, processor: str | None) -> None:
    """Show every segment of PROCESSOR (or of all processors): owner, token, claim age.

    A processor with positions but no tokens (a Spark projection's own sink) is listed with
    how many positions it has: what `reset --sink` clears there.
    """
    timeout_ms = claim_timeout_ms()
    with read_only_stores(journal_url) as stores:
        untracked = stores.tokens.processors_without_tokens()
        names = (  # "" names a processor, which the token store refuses: it listed them all
            [processor]
            if processor is not None
            else sorted({*stores.tokens.processors(), *untracked})
        )
        found = {
            name: SegmentStatus.every(
                stores.tokens.entries(name),
                stores.tokens.pending_requests(name),
                now_ms=_now_ms(),
                claim_timeout_ms=timeout_ms,
            )
            for name in names
            if name not in untracked
        }
    if as_json:
        print_json([row for name in names for row in _json_rows(name, found, untracked)])
        return
    for name in names:
        if name in untracked:
            click.echo(f"{shown_name(name)}  {without_tokens(untracked[name])}")
            continue
        for segment in found[name]:
            claim = (
                "not claimed"
                if segment.claim_age_ms is None
                else claim_age(segment, f"claimed {segment.claim_age_ms} ms ago")
            )
            click.echo(
                "  ".join(
                    (
                        f"{shown_name(name)}  {segment.segment:<16} "
                        f"owner={shown_name(segment.owner) if segment.owner else '-'}",
                        claim,
                        f"token={shown_token(segment)}",
                        *beyond_token(segment),
                        *pending_request(segment),
                    )
                )
            )
    if not names:
        click.echo("no processors", err=True)


def _json_rows(
    name: str, found: dict[str, list[SegmentStatus]], untracked: Mapping[str, int]
) -> list[dict[str, object]]:
    """The processor's rows of `status --json`: one per segment, or one for its positions.

    Every row has the same keys: `positions` counts a processor's positions where it has no
    tokens (null on a segment's row), and such a row has no segment.
    """
    if name in untracked:
        nothing = {field.name: None for field in fields(SegmentStatus)}
        return [{"processor": name, **nothing, "ahead": [], "positions": untracked[name]}]
    return [{"processor": name, **asdict(segment), "positions": None} for segment in found[name]]


def _steer(
    journal_url: str | None,
    action: str,
    processor: str,
    segment_id: int,
    *,
    replace_hand_over: bool,
) -> None:
    """Split, merge or release, once checked on the journal opened only to read.

    A processor or segment that is not there, or a merge of the root, was refused only once
    the journal was open for writing: a journal in rollback mode was switched to WAL by a
    command that then changed nothing (an older journal is checked once upgraded, as a reset's:
    `_readable_journal`).
    """
    operations = {"split": split_segment, "merge": merge_segment, "release": release_segment}
    timeout_ms = claim_timeout_ms()
    journal_url = existing_journal(journal_url)
    with ExitStack() as opened:
        if (journal := _readable_journal(opened, journal_url)) is not None:
            check_segment_change(journal.tokens, processor, segment_id, SegmentAction(action))
    with stores_at(journal_url) as stores:
        receipt: ControlReceipt = operations[action](
            stores.tokens,
            processor,
            segment_id,
            now_ms=_now_ms(),
            claim_timeout_ms=timeout_ms,
            replace_hand_over=replace_hand_over,
        )
    click.echo(receipt.message)


_replace_hand_over_option = click.option(
    "--replace-hand-over",
    is_flag=True,
    help="Replace a hand-over the segment's owner was asked for by a merge (refused otherwise).",
)


@processors.command(cls=NumberArgumentsCommand)
@journal_option
@_replace_hand_over_option
@click.argument("processor")
@click.argument("segment_id", type=SEGMENT_ID)
def split(
    journal_url: str | None, replace_hand_over: bool, processor: str, segment_id: int
) -> None:
    """Split segment SEGMENT_ID of PROCESSOR (its owner does it when the processor runs)."""
    _steer(journal_url, "split", processor, segment_id, replace_hand_over=replace_hand_over)


@processors.command(cls=NumberArgumentsCommand)
@journal_option
@_replace_hand_over_option
@click.argument("processor")
@click.argument("segment_id", type=SEGMENT_ID)
def merge(
    journal_url: str | None, replace_hand_over: bool, processor: str, segment_id: int
) -> None:
    """Merge segment SEGMENT_ID of PROCESSOR with its sibling."""
    _steer(journal_url, "merge", processor, segment_id, replace_hand_over=replace_hand_over)


@processors.command(cls=NumberArgumentsCommand)
@journal_option
@_replace_hand_over_option
@click.argument("processor")
@click.argument("segment_id", type=SEGMENT_ID)
def release(
    journal_url: str | None, replace_hand_over: bool, processor: str, segment_id: int
) -> None:
    """Ask the owner of segment SEGMENT_ID of PROCESSOR to release it.

    Of a segment nobody holds, withdraw the request left pending on it.
    """
    _steer(journal_url, "release", processor, segment_id, replace_hand_over=replace_hand_over)


@processors.command()
@journal_option
@click.argument("processor")
@click.option(
    "--to",
    "offset",
    default=None,
    help=f"Replay after this offset or from this time ({OFFSET_FORMS}); default: from the start.",
)
@click.option(
    "--sink",
    "sink_url",
    default=None,
    metavar="URL",
    help="A Spark projection's own sink: clear its positions there too.",
)
def reset(
    journal_url: str | None, processor: str, offset: str | None, sink_url: str | None
) -> None:
    """Reset PROCESSOR to replay its source; refused while it runs.

    The sink must exist with ordo's current schema (a misspelt one is refused, not created);
    it is opened before the journal, and the sink named as the journal is the journal.
    """
    token = _reset_token(offset)
    timeout_ms = claim_timeout_ms()
    journal_url = existing_journal(journal_url)
    _check_reset(journal_url, sink_url, processor, token, timeout_ms=timeout_ms)
    with ExitStack() as opened:
        sink = _sink_tokens(opened, journal_url, sink_url, mode="write")
        stores = opened.enter_context(stores_at(journal_url))
        receipt = reset_processor(
            stores.tokens,
            processor,
            token,
            now_ms=_now_ms(),
            claim_timeout_ms=timeout_ms,
            sink=sink,
        )
    click.echo(receipt.message)


def _check_reset(
    journal_url: str, sink_url: str | None, processor: str, token: TrackingToken, *, timeout_ms: int
) -> None:
    """Refuse what the reset would refuse on the stores opened only to read.

    Opening them to write may change them (an SQLite file switched to WAL): a reset refused
    there, of a running processor say, left both changed. A journal of an older schema cannot
    be read before its upgrade; the reset checks it once upgraded, as it checks every store
    again in case a processor started in between.
    """
    with ExitStack() as opened:
        journal = _readable_journal(opened, journal_url)
        if journal is None:
            return
        sink = _sink_tokens(opened, journal_url, sink_url, mode="read")
        check_reset_processor(
            journal.tokens,
            processor,
            token,
            now_ms=_now_ms(),
            claim_timeout_ms=timeout_ms,
            sink=sink,
        )


def _readable_journal(opened: ExitStack, journal_url: str) -> Stores | None:
    """The journal's stores opened only to read, in `opened`; None for an older schema.

    What a command refuses is checked on them before it opens the journal to write. A journal
    of an older schema cannot be read before its upgrade: the command checks it once upgraded.
    """
    try:
        return opened.enter_context(existing_stores_at(journal_url))
    except SchemaVersionError as exc:
        if exc.found > exc.supported:
            raise
        return None


def _sink_tokens(
    opened: ExitStack, journal_url: str, sink_url: str | None, *, mode: Literal["write", "read"]
) -> TokenStore | None:
    """The token store of `--sink`, open in `opened`; None unless it names another database.

    The sink must exist with ordo's current schema: a misspelt one is refused, not created.
    """
    if sink_url in (None, journal_url):
        return None
    stores = open_existing_stores(sink_url, mode=mode, what="sink database")
    return opened.enter_context(closing(stores)).tokens
