"""Segment requests when the change they ask for fails, on both backends: none is lost, no
claim is left behind, and a receipt names the requests a change actually replaced.

A failure is injected with a trigger that makes one kind of statement fail (as a database that
refuses writes for a moment), dropped to let the change through again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from ordo.errors import StorageError
from ordo.processing.control import (
    ControlReceipt,
    merge_segment,
    release_segment,
    split_segment,
)
from ordo.processing.ports import TokenEntry, TokenStore
from ordo.processing.processor import TrackingProcessor
from ordo.processing.segment_request import SegmentAction, SegmentRequest
from ordo.storage.location import SQLiteLocation, parse_location
from ordo.storage.stores import Stores
from processing_support import FAST, SqlRunner, counting_handler, source, wait_for
from token_support import TIMEOUT

if TYPE_CHECKING:
    from ordo.processing.segment_request import PendingRequest, UnclaimedChange

_FAILURE = "injected failure"


@pytest.fixture
def fail_on(sql: SqlRunner, journal_url: str) -> Callable[..., AbstractContextManager[None]]:
    """A context in which every `event` statement on `table` (for which `when` holds) fails."""
    is_sqlite = isinstance(parse_location(journal_url), SQLiteLocation)

    @contextmanager
    def failing(event: str, table: str, *, when: str = "TRUE") -> Iterator[None]:
        if is_sqlite:
            sql(
                f"CREATE TRIGGER ordo_fails BEFORE {event} ON {table} WHEN {when} "
                f"BEGIN SELECT RAISE(ABORT, '{_FAILURE}'); END"
            )
        else:
            sql(
                "CREATE OR REPLACE FUNCTION ordo_fails() RETURNS trigger LANGUAGE plpgsql AS "
                f"$$ BEGIN RAISE EXCEPTION '{_FAILURE}'; END $$"
            )
            sql(
                f"CREATE TRIGGER ordo_fails BEFORE {event} ON {table} FOR EACH ROW "
                f"WHEN ({when}) EXECUTE FUNCTION ordo_fails()"
            )
        try:
            yield
        finally:
            sql("DROP TRIGGER ordo_fails" + ("" if is_sqlite else f" ON {table}"))

    return failing


_EACH_OWNER_CHANGE = pytest.mark.parametrize(
    ("action", "segment_count", "event", "when"),
    [
        (SegmentAction.SPLIT, 1, "INSERT", "TRUE"),  # the new half's row
        (SegmentAction.MERGE, 2, "DELETE", "TRUE"),  # the halves' rows
        (SegmentAction.RELEASE, 1, "UPDATE", "NEW.owner IS NULL"),  # the claim given up
    ],
    ids=["split", "merge", "release"],
)


@_EACH_OWNER_CHANGE
def test_a_request_whose_change_fails_stays_pending_until_it_is_made(
    stores: Stores,
    fail_on: Callable[..., AbstractContextManager[None]],
    caplog: pytest.LogCaptureFixture,
    action: SegmentAction,
    segment_count: int,
    event: str,
    when: str,
) -> None:
    """The owner took (deleted) the request and then made the change: when the change failed
    (here a write the database refused; a store briefly unavailable, a lost claim), the request
    was gone, only logged, though the operator had been told that the owner was asked. The
    request goes with the change now, in its transaction: it stays pending while the change
    fails, and the owner makes it once it can. (A write refused, which no retry mends, stops
    the processor: it makes the request once it is started again.)"""
    caplog.set_level(logging.INFO)
    settings = replace(FAST, thread_count=1, initial_segment_count=segment_count)
    processor = TrackingProcessor(
        "counts", source(stores), stores.tokens, counting_handler, settings=settings
    )
    request = SegmentRequest(action=action)
    with processor:
        wait_for(lambda: stores.tokens.entries("counts")[0].owner is not None)
        with fail_on(event, "tokens", when=when):
            stores.tokens.request("counts", 0, request, now_ms=0)
            wait_for(lambda: not processor.is_running)
            assert isinstance(processor.failure, StorageError)
            assert _FAILURE in str(processor.failure)
            assert [
                (p.segment_id, p.request) for p in stores.tokens.pending_requests("counts")
            ] == [(0, request)]
    with processor:
        wait_for(lambda: stores.tokens.pending_requests("counts") == [])
        made = {
            SegmentAction.SPLIT: lambda: len(stores.tokens.entries("counts")) == 2,
            SegmentAction.MERGE: lambda: len(stores.tokens.entries("counts")) == 1,
            SegmentAction.RELEASE: lambda: "released on request" in caplog.text,
        }[action]
        wait_for(made)
    assert processor.failure is None


def test_an_operator_s_release_that_fails_leaves_no_claim_behind(
    stores: Stores, fail_on: Callable[..., AbstractContextManager[None]]
) -> None:
    """The release of a segment nobody held claimed it for the operator, and then withdrew the
    request left on it as it released the claim: when that failed, the operator's claim stayed,
    and no processor took the segment until the claim timeout. The change is one transaction
    now: it fails whole, and the request stays."""
    stores.tokens.initialize("p", segment_count=2)
    left = SegmentRequest(action=SegmentAction.SPLIT)
    stores.tokens.request("p", 1, left, now_ms=0)
    with fail_on("DELETE", "segment_requests"), pytest.raises(StorageError, match=_FAILURE):
        release_segment(stores.tokens, "p", 1, now_ms=1, claim_timeout_ms=TIMEOUT)
    assert [(e.owner, e.claimed_at_ms) for e in stores.tokens.entries("p")] == [(None, None)] * 2
    assert [(p.segment_id, p.request) for p in stores.tokens.pending_requests("p")] == [(1, left)]


class _RequestsChangedAtTheChange:
    """The token store, except that right before an operator's change of free segments is
    made, or its request to a held segment's owner stored, `meanwhile` changes the requests
    pending there (an owner's take, another's request): after the receipt's read of them, if
    it reads them first (a moment a test cannot time otherwise). The change used to start with
    the operator's claim."""

    def __init__(self, tokens: TokenStore, meanwhile: Callable[[TokenStore], object]) -> None:
        self._tokens = tokens
        self._meanwhile: Callable[[TokenStore], object] | None = meanwhile

    def __getattr__(self, name: str) -> object:
        return getattr(self._tokens, name)

    def _race(self) -> None:
        if self._meanwhile is not None:
            self._meanwhile(self._tokens)
            self._meanwhile = None

    def claim(self, *args: object, **kwargs: object) -> TokenEntry:
        self._race()
        return self._tokens.claim(*args, **kwargs)  # type: ignore[arg-type]

    def change_unclaimed(self, *args: object, **kwargs: object) -> UnclaimedChange:
        self._race()
        return self._tokens.change_unclaimed(*args, **kwargs)  # type: ignore[arg-type]

    def request(self, *args: object, **kwargs: object) -> PendingRequest | None:
        self._race()
        return self._tokens.request(*args, **kwargs)  # type: ignore[arg-type]


def _races(left: SegmentRequest) -> dict[str, Callable[[TokenStore], object]]:
    """What changes the requests pending on segment 1 of "p" while an operator's change is
    made: `left` taken by an owner, which claimed the segment and obeyed, or stored."""
    return {
        "taken": lambda tokens: tokens.take_request("p", 1),
        "stored": lambda tokens: tokens.request("p", 1, left, now_ms=0),
    }


_RELEASE = SegmentRequest(action=SegmentAction.RELEASE)
_RACES = _races(_RELEASE)


@pytest.mark.parametrize(
    ("operation", "done", "note"),
    [
        (split_segment, "split Segment[1/1] into Segment[1/3] and Segment[3/3]", "replacing"),
        (merge_segment, "merged into Segment[0/0]", "replacing"),
        (release_segment, "segment Segment[1/1] is not claimed", "withdrew"),
    ],
    ids=["split", "merge", "release"],
)
@pytest.mark.parametrize("race", _RACES)
def test_an_operator_s_change_names_the_requests_it_replaced(
    stores: Stores,
    operation: Callable[..., ControlReceipt],
    done: str,
    note: str,
    race: str,
) -> None:
    """The receipt named the requests pending when it read them, before the change deleted
    what was pending then: a request an owner took in between (it claimed the segment and
    obeyed) was named as replaced, and one stored in between was replaced unnamed. The
    receipt names what the change deleted now."""
    stores.tokens.initialize("p", segment_count=2)
    if race == "taken":
        stores.tokens.request("p", 1, _RELEASE, now_ms=0)
    tokens = _RequestsChangedAtTheChange(stores.tokens, _RACES[race])
    receipt = operation(tokens, "p", 1, now_ms=1, claim_timeout_ms=TIMEOUT)
    of = " of Segment[1/1]" if operation is merge_segment else ""
    replaced = f" ({note} the pending release request{of})" if race == "stored" else ""
    assert receipt.message == done + replaced
    assert stores.tokens.pending_requests("p") == []


_MERGE = SegmentRequest(action=SegmentAction.MERGE)


@pytest.mark.parametrize(
    ("operation", "asked"),
    [(split_segment, "split segment Segment[1/1]"), (release_segment, "release Segment[1/1]")],
    ids=["split", "release"],
)
@pytest.mark.parametrize("race", _RACES)
def test_an_operator_s_request_names_the_request_it_replaced(
    stores: Stores, operation: Callable[..., ControlReceipt], asked: str, race: str
) -> None:
    """The segment is held, so its owner is asked. The receipt read the pending requests
    before it stored the request: it named a merge the owner took in between as replaced, and
    missed one stored in between, which the request replaced. The store says what it replaced
    now, from the same transaction."""
    stores.tokens.initialize("p", segment_count=2)
    stores.tokens.claim("p", 1, "b", now_ms=0, claim_timeout_ms=TIMEOUT)
    if race == "taken":
        stores.tokens.request("p", 1, _MERGE, now_ms=0)
    tokens = _RequestsChangedAtTheChange(stores.tokens, _races(_MERGE)[race])
    receipt = operation(tokens, "p", 1, now_ms=1, claim_timeout_ms=TIMEOUT)
    replaced = " (replacing the pending merge request)" if race == "stored" else ""
    assert receipt == ControlReceipt(is_done=False, message=f"asked b to {asked}{replaced}")
