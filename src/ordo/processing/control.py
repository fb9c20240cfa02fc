"""Operator actions on a processor's segments, whether or not the processor is running.

A segment nobody holds is changed at once, in one transaction that replaces a request left pending
on it (by an owner that stopped before obeying it), as a later request would: left there, the next
owner would carry it out on the half it then names (TokenStore.change_unclaimed). A release of such
a segment only withdraws that request. The receipt names the requests the change deleted. A segment
that a running processor holds is changed by its owner, between two batches, through a request in
the token store, wherever that processor runs. Every action checks its arguments before it reads the
token store (InvalidInputError; ConfigurationError for a token store of another kind; the token
store checks the processor name). A request to a segment whose owner is to hand it over for a
merge is refused (PendingHandOverError) unless `replace_hand_over` says to replace the hand-over.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ordo.errors import (
    ConfigurationError,
    InvalidInputError,
    OrdoError,
    PartialResetError,
    UnknownProcessorError,
)
from ordo.journal import validation
from ordo.processing.ports import TokenEntry, TokenStore
from ordo.processing.segment import Segment
from ordo.processing.segment_lookup import merged_pair, segment_entry
from ordo.processing.segment_request import (
    PendingRequest,
    SegmentAction,
    SegmentRequest,
    UnclaimedChange,
)
from ordo.processing.token import TrackingToken
from ordo.query.offset import refuse_future


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlReceipt:
    """What an operator action did: changed the segments now, or asked their owner."""

    is_done: bool
    message: str


def split_segment(
    tokens: TokenStore,
    processor: str,
    segment_id: int,
    *,
    now_ms: int,
    claim_timeout_ms: int,
    replace_hand_over: bool = False,
) -> ControlReceipt:
    """Split a segment now if nobody holds it, otherwise ask its owner to."""
    steering = _Steering.checked(tokens, processor, now_ms, claim_timeout_ms, replace_hand_over)
    entry = steering.entry(segment_id)
    if not steering.is_free(entry):
        return steering.ask(entry, SegmentAction.SPLIT, f"split segment {entry.segment}")
    change = steering.change(segment_id, SegmentAction.SPLIT)
    low, high = change.segments
    split = low.merge(high)  # what was split: the entry read may have been split since
    replaced = _replaced(change.replaced, [split])
    return ControlReceipt(is_done=True, message=f"split {split} into {low} and {high}{replaced}")


def merge_segment(
    tokens: TokenStore,
    processor: str,
    segment_id: int,
    *,
    now_ms: int,
    claim_timeout_ms: int,
    replace_hand_over: bool = False,
) -> ControlReceipt:
    """Merge a segment with its sibling now if nobody holds either, otherwise ask an owner."""
    steering = _Steering.checked(tokens, processor, now_ms, claim_timeout_ms, replace_hand_over)
    entry, sibling = merged_pair(tokens, processor, segment_id)
    free = [e for e in (entry, sibling) if steering.is_free(e)]
    if len(free) == 2:
        change = steering.change(segment_id, SegmentAction.MERGE)
        merged = change.segments[0]
        replaced = _replaced(change.replaced, merged.split())  # the halves merged, as they were
        return ControlReceipt(is_done=True, message=f"merged into {merged}{replaced}")
    held = entry if entry not in free else sibling
    return steering.ask(held, SegmentAction.MERGE, f"merge {held.segment} with its sibling")


def release_segment(
    tokens: TokenStore,
    processor: str,
    segment_id: int,
    *,
    now_ms: int,
    claim_timeout_ms: int,
    replace_hand_over: bool = False,
) -> ControlReceipt:
    """Ask the segment's owner to release it; withdraw a request left on it when nobody does."""
    steering = _Steering.checked(tokens, processor, now_ms, claim_timeout_ms, replace_hand_over)
    entry = steering.entry(segment_id)
    if not steering.is_free(entry):
        return steering.ask(entry, SegmentAction.RELEASE, f"release {entry.segment}")
    change = steering.change(segment_id, SegmentAction.RELEASE)
    withdrawn = _replaced(change.replaced, change.segments, verb="withdrew")
    message = f"segment {change.segments[0]} is not claimed{withdrawn}"
    return ControlReceipt(is_done=True, message=message)


def check_segment_change(
    tokens: TokenStore, processor: str, segment_id: int, action: SegmentAction
) -> None:
    """Raise what split_segment, merge_segment or release_segment (`action`) refuse on reading.

    A processor or segment that is not there, a merge of the root or of a segment whose
    sibling is split further; nothing is changed. So that a command can check on stores opened
    only to read before it opens them to write, as check_reset_processor: opening to write may
    change a database (an older schema upgraded, an SQLite file switched to WAL) that a
    refused command must leave as it was.
    """
    check_token_store(tokens)
    if action is SegmentAction.MERGE:
        merged_pair(tokens, processor, segment_id)
    else:
        segment_entry(tokens, processor, segment_id)


@dataclass(frozen=True, slots=True)
class _Steering:
    """The checked arguments of a split, merge or release, and the steps the three share."""

    tokens: TokenStore
    processor: str
    now_ms: int
    claim_timeout_ms: int
    replace_hand_over: bool

    @classmethod
    def checked(
        cls,
        tokens: TokenStore,
        processor: str,
        now_ms: int,
        claim_timeout_ms: int,
        replace_hand_over: bool,
    ) -> _Steering:
        """The arguments, once checked (before the token store is read)."""
        check_token_store(tokens)
        check_claim_times(now_ms, claim_timeout_ms)
        return cls(tokens, processor, now_ms, claim_timeout_ms, replace_hand_over)

    def entry(self, segment_id: int) -> TokenEntry:
        """The segment's entry (`segment_entry`)."""
        return segment_entry(self.tokens, self.processor, segment_id)

    def is_free(self, entry: TokenEntry) -> bool:
        """Whether nobody holds the segment (no claim, or an expired one)."""
        return not entry.is_held(now_ms=self.now_ms, claim_timeout_ms=self.claim_timeout_ms)

    def change(self, segment_id: int, action: SegmentAction) -> UnclaimedChange:
        """Do `action` now on segments nobody holds (TokenStore.change_unclaimed)."""
        return self.tokens.change_unclaimed(
            self.processor,
            segment_id,
            action,
            now_ms=self.now_ms,
            claim_timeout_ms=self.claim_timeout_ms,
        )

    def ask(self, entry: TokenEntry, action: SegmentAction, what: str) -> ControlReceipt:
        """Leave a request of `action` for the segment's owner, saying what it replaces.

        A segment holds one request and the latest wins, so the message says which one a later
        request drops (a split its owner has not taken yet, say). A pending hand-over is
        replaced only with `replace_hand_over` (see TokenStore.request). The store says what it
        replaced, read in the transaction that replaces it, so that the receipt neither names a
        request the owner obeyed meanwhile nor misses one stored meanwhile.
        """
        replaced = self.tokens.request(
            self.processor,
            entry.segment.segment_id,
            SegmentRequest(action=action),
            now_ms=self.now_ms,
            replace_hand_over=self.replace_hand_over,
        )
        note = _replaced([] if replaced is None else [replaced], [entry.segment])
        return ControlReceipt(is_done=False, message=f"asked {entry.owner} to {what}{note}")


def reset_processor(
    tokens: TokenStore,
    processor: str,
    token: TrackingToken,
    *,
    now_ms: int,
    claim_timeout_ms: int,
    sink: TokenStore | None = None,
) -> ControlReceipt:
    """Reset every segment to `token` (refused while the processor runs).

    A token in the future is refused (FutureOffsetError), as a query refuses such an offset:
    the processor would skip every event written until then. `sink` is the token store of a
    Spark projection's own sink, which holds its positions: they are cleared too. Both
    stores are checked before either changes, so a refused reset changes neither (apart from
    a claim taken in between, which the journal's reset still refuses, before the sink's).

    The two stores change in two transactions, the journal's first. A projection reads its
    positions from the sink: they are what its batches dedupe by and where its source starts
    each persistence id; the journal's tokens only report its progress and, once reset,
    bound how far back its source looks (up to where the tokens had reached). Reset alone,
    the journal leaves a projection restarted meanwhile going on as if not reset (a gap that
    held it up holds it up again) and applying nothing twice; reset alone, the sink would
    leave it looking back over events it applied with no positions to skip them by: it would
    apply them again. When the sink's reset fails after the journal's committed (a
    projection started since the check, the sink unreachable), PartialResetError says so;
    the same reset run again finishes it: the journal's tokens, reset again, keep what they
    replay (a reset replays up to the furthest offset the tokens or their replay point had
    reached), and the sink's positions go, though the journal holds nothing left to reset
    (_reset_with_sink).
    """
    journal_holds_it = check_reset_processor(
        tokens, processor, token, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms, sink=sink
    )
    if sink is not None:
        return _reset_with_sink(
            tokens,
            sink,
            processor,
            token,
            journal_holds_it=journal_holds_it,
            now_ms=now_ms,
            claim_timeout_ms=claim_timeout_ms,
        )
    tokens.reset(processor, token, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms)
    return _reset_receipt(f"reset {processor!r} to {token}")


def check_reset_processor(
    tokens: TokenStore,
    processor: str,
    token: TrackingToken,
    *,
    now_ms: int,
    claim_timeout_ms: int,
    sink: TokenStore | None = None,
) -> bool:
    """Raise what reset_processor would refuse, changing nothing; whether `tokens` holds any.

    So that a command can check on stores opened only to read before it opens them to write:
    opening to write may change a database (an older schema upgraded, an SQLite file switched
    to WAL) that a refused reset, of a running processor say, must leave as it was.
    The journal may hold nothing when a sink is given: see _reset_with_sink.
    """
    check_token_store(tokens)
    check_claim_times(now_ms, claim_timeout_ms)
    check_token(token)
    if sink is not None and not all(
        callable(getattr(sink, method, None)) for method in ("check_reset", "reset")
    ):  # the two it is asked for: a str was an AttributeError once the journal was checked
        msg = f"sink must be a TokenStore (with check_reset() and reset()), got {sink!r:.80}"
        raise ConfigurationError(msg)
    if token.offset is not None:
        refuse_future(token.offset, now_ns=now_ms * 1_000_000)
    if sink is None:
        tokens.check_reset(processor, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms)
        return True
    journal_holds_it = _holds_something_to_reset(
        tokens, processor, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms
    )
    try:
        sink.check_reset(processor, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms)
    except UnknownProcessorError as exc:
        msg = f"{'the sink' if journal_holds_it else 'the journal and the sink'}: {exc}"
        raise UnknownProcessorError(msg) from exc
    return journal_holds_it


def _reset_with_sink(
    tokens: TokenStore,
    sink: TokenStore,
    processor: str,
    token: TrackingToken,
    *,
    journal_holds_it: bool,
    now_ms: int,
    claim_timeout_ms: int,
) -> ControlReceipt:
    """reset_processor with a sink: the journal may hold nothing, the sink may not.

    A journal that holds no tokens or positions of the processor is reset by the sink alone,
    so that the same reset run again finishes one whose sink failed (PartialResetError), as
    the error says, though the journal's part left nothing there; a projection whose source
    does not name it as its processor has nothing in the journal either. A sink that holds
    nothing is refused (UnknownProcessorError), as a sink named by mistake: `--sink` is there
    to clear positions. `journal_holds_it` is what check_reset_processor found.
    """
    try:
        tokens.reset(processor, token, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms)
    except UnknownProcessorError:
        journal_holds_it = False  # cleared since the check: nothing there to reset
    if not journal_holds_it:  # the sink's reset is the whole of it: its failure is no partial
        sink.reset(processor, token, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms)
        return _reset_receipt(
            f"cleared the positions of {processor!r} in the sink (the journal holds no tokens "
            "or positions of it)"
        )
    try:
        sink.reset(processor, token, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms)
    except OrdoError as exc:
        raise PartialResetError(processor=processor, cause=exc) from exc
    return _reset_receipt(f"reset {processor!r} to {token} and cleared its positions in the sink")


def _holds_something_to_reset(
    tokens: TokenStore, processor: str, *, now_ms: int, claim_timeout_ms: int
) -> bool:
    """Whether `tokens` holds tokens or positions of `processor`, once its reset is checked."""
    try:
        tokens.check_reset(processor, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms)
    except UnknownProcessorError:
        return False
    return True


def _reset_receipt(done: str) -> ControlReceipt:
    return ControlReceipt(is_done=True, message=f"{done}; events processed before are replays")


def check_claim_times(now_ms: object, claim_timeout_ms: object) -> None:
    """Epoch and timeout milliseconds are stored and compared as 64-bit integers.

    None failed with TypeError in the middle of a claim, 2**64 as SQLite's OverflowError but
    as PostgreSQL's StorageError, NaN was stored by SQLite as a claim without a time, and 1.5
    rounded to 2 by PostgreSQL. The token store's operations check them too.
    """
    validation.integer(now_ms, name="now_ms")
    validation.integer(claim_timeout_ms, name="claim_timeout_ms")


def check_token_store(tokens: object) -> None:
    """ConfigurationError unless `tokens` is a TokenStore (every method of the port).

    None or another object failed as an AttributeError from its first read.
    """
    if not isinstance(tokens, TokenStore):
        msg = f"tokens must be a TokenStore, got {tokens!r:.80}"
        raise ConfigurationError(msg)


def check_token(token: object) -> None:
    """InvalidInputError unless `token` is a TrackingToken (a TimeUUID or a text is not one)."""
    if not isinstance(token, TrackingToken):
        msg = f"token must be a TrackingToken, got {type(token).__name__}: {token!r:.80}"
        raise InvalidInputError(msg)


def _replaced(
    requests: Sequence[PendingRequest],
    segments: Sequence[Segment],
    *,
    verb: str = "replacing",
) -> str:
    """The receipt's note of the `requests` on `segments` that the action replaced.

    Each is named with its segment when the action has two. A change of free segments names
    them as the change found them (UnclaimedChange), not as the command read them before:
    split meanwhile by another operator, they were named by a mask they no longer had, and a
    request deleted on a half the split made was left out of the receipt.
    """
    pending = {p.segment_id: p.request for p in requests}
    replaced = [
        f"the pending {request.describe()} request" + (f" of {s}" if len(segments) > 1 else "")
        for s in segments
        if (request := pending.get(s.segment_id)) is not None
    ]
    return f" ({verb} {' and '.join(replaced)})" if replaced else ""
