"""The token store contract: resets, the positions they clear and the leases that refuse them."""

from __future__ import annotations

from datetime import timedelta
from functools import partial
from typing import cast

import pytest

from ordo.errors import PartialResetError, UnableToClaimTokenError, UnknownProcessorError
from ordo.processing.control import ControlReceipt, reset_processor
from ordo.processing.ports import PROJECTION_LEASE_TIMEOUT, TokenStore
from ordo.processing.token import TrackingToken
from ordo.storage.stores import Stores
from ordo.time import TimeUUID
from ordo.types import PersistenceId
from token_support import T1, T2, TIMEOUT, claimed_with_token
from token_support import applied as _applied


def test_reset_marks_replays_and_is_refused_while_running(stores: Stores) -> None:
    stores.tokens.initialize("p", segment_count=2)
    stores.tokens.claim("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    with stores.tokens.batch("p", 0, "a") as batch:
        batch.record(PersistenceId("x"), 5)
        batch.store_token(TrackingToken(T2))
    with pytest.raises(UnableToClaimTokenError, match="running"):
        stores.tokens.reset("p", TrackingToken(), now_ms=1, claim_timeout_ms=TIMEOUT)
    assert stores.tokens.entries("p")[0].token == TrackingToken(T2)
    stores.tokens.release("p", 0, "a")
    stores.tokens.reset("p", TrackingToken(), now_ms=1, claim_timeout_ms=TIMEOUT)
    entries = stores.tokens.entries("p")
    assert all(e.token == TrackingToken() and e.replay_until == TrackingToken(T2) for e in entries)
    stores.tokens.claim("p", 0, "a", now_ms=2, claim_timeout_ms=TIMEOUT)
    with stores.tokens.batch("p", 0, "a") as batch:
        assert batch.positions([PersistenceId("x")]) == {}


def test_reset_replays_up_to_the_furthest_offset_a_merged_part_ahead_reached(
    stores: Stores,
) -> None:
    """The merged token resumes at T1, but the half ahead handled up to T2: replays too."""
    stores.tokens.initialize("p", segment_count=2)
    for segment_id, offset in ((0, T1), (1, T2)):
        claimed_with_token(stores, segment_id, "a", offset)
    stores.tokens.release("p", 1, "a")
    stores.tokens.merge("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    stores.tokens.release("p", 0, "a")
    stores.tokens.reset("p", TrackingToken(), now_ms=1, claim_timeout_ms=TIMEOUT)
    (entry,) = stores.tokens.entries("p")
    assert (entry.token, entry.replay_until) == (TrackingToken(), TrackingToken(T2))


def _processed_to(stores: Stores, offset: TimeUUID) -> None:
    """Processor p, one segment, unclaimed, with its token at `offset`."""
    stores.tokens.initialize("p", segment_count=1)
    stores.tokens.advance_unclaimed("p", offset, now_ms=0, claim_timeout_ms=TIMEOUT)


def test_a_reset_where_the_processor_has_positions_but_no_tokens_clears_them(
    stores: Stores,
) -> None:
    """A Spark projection's own sink: the reset said it had no tokens and left them."""
    _applied(stores, {"x": 3})
    stores.tokens.check_reset("p", now_ms=0, claim_timeout_ms=TIMEOUT)
    stores.tokens.reset("p", TrackingToken(), now_ms=0, claim_timeout_ms=TIMEOUT)
    assert stores.tokens.positions("p") == {}
    assert stores.tokens.processors() == []  # no tokens made up


def test_processors_without_tokens_are_those_a_reset_clears_only_positions_of(
    stores: Stores,
) -> None:
    _applied(stores, {"x": 3, "y": 1}, processor="sink-only")
    with stores.tokens.batch("handled-only", 0, "spark") as batch:
        batch.record_handled(PersistenceId("x"), 1, T1.to_bytes())
    _processed_to(stores, T2)
    _applied(stores, {"x": 3})  # p has tokens: listed by processors()

    assert stores.tokens.processors_without_tokens() == {"handled-only": 0, "sink-only": 2}
    assert stores.tokens.processors() == ["p"]


def test_a_reset_where_the_processor_has_neither_tokens_nor_positions_is_refused(
    stores: Stores,
) -> None:
    _applied(stores, {"x": 3}, processor="other")
    for call in (stores.tokens.check_reset, partial(stores.tokens.reset, token=TrackingToken())):
        with pytest.raises(UnknownProcessorError, match="'p' has no tokens or positions"):
            call("p", now_ms=0, claim_timeout_ms=TIMEOUT)
    assert stores.tokens.positions("other") == {"x": 3}


def test_a_reset_with_a_sink_clears_the_positions_there_too(
    stores: Stores, sink_stores: Stores
) -> None:
    _processed_to(stores, T2)
    _applied(sink_stores, {"x": 3})
    receipt = _reset_with_sink(stores, sink_stores, now_ms=0)
    assert "cleared its positions in the sink" in receipt.message
    (entry,) = stores.tokens.entries("p")
    assert (entry.token, entry.replay_until) == (TrackingToken(), TrackingToken(T2))
    assert sink_stores.tokens.positions("p") == {}


def test_a_reset_refused_by_the_journal_or_the_sink_changes_neither(
    stores: Stores, sink_stores: Stores
) -> None:
    _processed_to(stores, T2)
    _applied(sink_stores, {"x": 3}, processor="other")

    reset = partial(_reset_with_sink, stores, sink_stores, now_ms=1)

    with pytest.raises(UnknownProcessorError, match=r"^the sink: processor 'p' has no tokens"):
        reset()
    assert stores.tokens.entries("p")[0].token == TrackingToken(T2)
    _applied(sink_stores, {"x": 3})
    stores.tokens.claim("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    with pytest.raises(UnableToClaimTokenError, match="running"):
        reset()
    assert sink_stores.tokens.positions("p") == {"x": 3}
    assert stores.tokens.entries("p")[0].token == TrackingToken(T2)


def test_a_reset_is_refused_while_a_projection_renews_its_lease(
    stores: Stores, sink_stores: Stores
) -> None:
    """A Spark projection holds no claim: a reset cleared its positions while it ran."""
    _processed_to(stores, T2)
    _applied(sink_stores, {"x": 3})
    for tokens in (stores.tokens, sink_stores.tokens):
        tokens.renew_projection_lease("p", "driver-1", now_ms=1_000)

    def reset(now_ms: int) -> None:
        _reset_with_sink(stores, sink_stores, now_ms=now_ms)

    expected = (
        r"^processor 'p' is running \(a Spark projection: its driver 'driver-1' renewed its "
        r"lease 9000 ms ago\): stop its streaming query before resetting$"
    )
    with pytest.raises(UnableToClaimTokenError, match=expected):
        reset(1_000 + TIMEOUT - 1_000)
    sink_stores.tokens.release_projection_lease("p", "driver-1")  # only the sink's is left
    stores.tokens.release_projection_lease("p", "other-driver")  # not its lease: it stays
    with pytest.raises(UnableToClaimTokenError, match="renewed its lease 0 ms ago"):
        reset(1_000)
    assert sink_stores.tokens.positions("p") == {"x": 3}
    assert stores.tokens.entries("p")[0].token == TrackingToken(T2)
    stores.tokens.release_projection_lease("p", "driver-1")
    sink_stores.tokens.renew_projection_lease("p", "driver-2", now_ms=1_000)
    with pytest.raises(UnableToClaimTokenError, match="'driver-2'"):
        reset(1_000)
    assert sink_stores.tokens.positions("p") == {"x": 3}

    reset(1_001 + TIMEOUT)  # driver-2 crashed: its lease expired as a claim does

    assert sink_stores.tokens.positions("p") == {}
    assert stores.tokens.entries("p")[0].token == TrackingToken()
    _applied(sink_stores, {"x": 1})
    reset(1_000)  # the reset took the expired lease away: no clock can make it fresh again
    assert sink_stores.tokens.positions("p") == {}


def test_a_reset_is_refused_while_a_projection_that_applied_nothing_yet_holds_its_lease(
    stores: Stores, sink_stores: Stores
) -> None:
    """Its driver writes the lease before the stream starts: a sink holding only that lease
    said the processor had no tokens or positions to reset, though it ran. A lapsed lease
    alone is a crashed driver's, which refuses nothing: the sink has nothing to reset."""
    _processed_to(stores, T2)
    sink_stores.tokens.renew_projection_lease("p", "driver-1", now_ms=1_000)
    running = r"^processor 'p' is running .* its driver 'driver-1' renewed its lease 0 ms ago"

    with pytest.raises(UnableToClaimTokenError, match=running):
        _reset_with_sink(stores, sink_stores, now_ms=1_000)
    for call in (
        sink_stores.tokens.check_reset,
        partial(sink_stores.tokens.reset, token=TrackingToken()),
    ):
        with pytest.raises(UnableToClaimTokenError, match=running):
            call("p", now_ms=1_000, claim_timeout_ms=TIMEOUT)
    assert stores.tokens.entries("p")[0].token == TrackingToken(T2)

    with pytest.raises(UnknownProcessorError, match=r"^the sink: processor 'p' has no tokens"):
        _reset_with_sink(stores, sink_stores, now_ms=1_001 + TIMEOUT)
    assert stores.tokens.entries("p")[0].token == TrackingToken(T2)


class _ProjectionStartingAfterTheCheck:
    """A sink's token store whose projection's driver writes its lease right after the sink
    was checked: the race, made to happen between reset_processor's check and its reset.

    Only the two calls reset_processor makes on a sink; both reach the real store.
    """

    def __init__(self, tokens: TokenStore) -> None:
        self.tokens = tokens

    def check_reset(self, processor: str, *, now_ms: int, claim_timeout_ms: int) -> None:
        self.tokens.check_reset(processor, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms)
        self.tokens.renew_projection_lease(processor, "driver-1", now_ms=now_ms)

    def reset(
        self, processor: str, token: TrackingToken, *, now_ms: int, claim_timeout_ms: int
    ) -> None:
        self.tokens.reset(processor, token, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms)


def test_a_reset_that_reset_the_journal_but_not_the_sink_says_so_and_runs_again_to_the_end(
    stores: Stores, sink_stores: Stores
) -> None:
    """The two databases change one after the other: a projection started after the check
    refused the sink's reset once the journal's had committed, and the user was told only
    that the projection ran, not that the journal was reset and the sink not."""
    _processed_to(stores, T2)
    _applied(sink_stores, {"x": 3})
    racing = cast(TokenStore, _ProjectionStartingAfterTheCheck(sink_stores.tokens))

    with pytest.raises(PartialResetError) as raised:
        reset_processor(
            stores.tokens, "p", TrackingToken(), now_ms=1, claim_timeout_ms=TIMEOUT, sink=racing
        )

    assert str(raised.value) == (
        "processor 'p' was reset in the journal but not in the sink (processor 'p' is running "
        "(a Spark projection: its driver 'driver-1' renewed its lease 0 ms ago): stop its "
        "streaming query before resetting): the journal's tokens are reset, the sink's "
        "positions are not; run the same reset again, with the projection stopped, to finish it"
    )
    assert raised.value.processor == "p"
    assert isinstance(raised.value.__cause__, UnableToClaimTokenError)
    assert raised.value.cause is raised.value.__cause__
    (entry,) = stores.tokens.entries("p")
    assert (entry.token, entry.replay_until) == (TrackingToken(), TrackingToken(T2))
    receipt = _run_again_once_stopped(stores, sink_stores)

    assert "cleared its positions in the sink" in receipt.message
    (entry,) = stores.tokens.entries("p")
    assert (entry.token, entry.replay_until) == (TrackingToken(), TrackingToken(T2))
    assert sink_stores.tokens.positions("p") == {}


def test_a_reset_run_again_after_a_partial_one_finishes_it_where_the_journal_held_only_positions(
    stores: Stores, sink_stores: Stores
) -> None:
    """The journal's part cleared its only rows, the positions: the same reset run again, as
    PartialResetError says to, was refused as having nothing to reset in the journal."""
    _applied(stores, {"x": 3})
    _applied(sink_stores, {"x": 3})
    racing = cast(TokenStore, _ProjectionStartingAfterTheCheck(sink_stores.tokens))

    with pytest.raises(PartialResetError):
        reset_processor(
            stores.tokens, "p", TrackingToken(), now_ms=1, claim_timeout_ms=TIMEOUT, sink=racing
        )

    assert stores.tokens.positions("p") == {}
    receipt = _run_again_once_stopped(stores, sink_stores)

    assert receipt.message == (
        "cleared the positions of 'p' in the sink (the journal holds no tokens or positions "
        "of it); events processed before are replays"
    )
    assert sink_stores.tokens.positions("p") == {}
    assert stores.tokens.processors() == []  # no tokens made up in the journal


def test_a_reset_with_a_sink_is_refused_as_unknown_only_when_the_sink_holds_nothing(
    stores: Stores, sink_stores: Stores
) -> None:
    """A journal holding nothing is the sink's reset alone; a sink holding nothing is a sink
    named by mistake, whatever the journal holds."""
    _applied(sink_stores, {"x": 3}, processor="other")
    with pytest.raises(
        UnknownProcessorError,
        match=r"^the journal and the sink: processor 'p' has no tokens or positions to reset$",
    ):
        _reset_with_sink(stores, sink_stores, now_ms=1)
    stores.tokens.renew_projection_lease("p", "driver-1", now_ms=1)
    _applied(sink_stores, {"x": 3})
    with pytest.raises(UnableToClaimTokenError, match="'driver-1'"):
        _reset_with_sink(stores, sink_stores, now_ms=1)  # a lease in the journal still refuses
    assert sink_stores.tokens.positions("p") == {"x": 3}
    stores.tokens.release_projection_lease("p", "driver-1")

    _reset_with_sink(stores, sink_stores, now_ms=1)

    assert sink_stores.tokens.positions("p") == {}
    assert sink_stores.tokens.positions("other") == {"x": 3}


def test_a_reset_with_a_short_claim_timeout_still_refuses_a_live_projection_lease(
    stores: Stores, sink_stores: Stores
) -> None:
    """The driver renews its lease every 2 s, whatever the claim timeout: a reset given a
    claim timeout of 1 s took a lease renewed 1.5 s ago for a crashed driver's, and reset
    under the running projection."""
    _processed_to(stores, T2)
    _applied(sink_stores, {"x": 3})
    sink_stores.tokens.renew_projection_lease("p", "driver-1", now_ms=1_000)
    lease_timeout_ms = PROJECTION_LEASE_TIMEOUT // timedelta(milliseconds=1)

    def reset(now_ms: int) -> None:
        _reset_with_sink(stores, sink_stores, now_ms=now_ms, claim_timeout_ms=1_000)

    for now_ms in (2_500, 1_000 + lease_timeout_ms):
        with pytest.raises(UnableToClaimTokenError, match="'driver-1' renewed its lease"):
            reset(now_ms)
    assert sink_stores.tokens.positions("p") == {"x": 3}
    assert stores.tokens.entries("p")[0].token == TrackingToken(T2)

    reset(1_001 + lease_timeout_ms)  # no renewal for the whole lease timeout: a crashed driver

    assert sink_stores.tokens.positions("p") == {}


def _reset_with_sink(
    stores: Stores, sink_stores: Stores, *, now_ms: int, claim_timeout_ms: int = TIMEOUT
) -> ControlReceipt:
    """Processor "p" reset to the start in the journal of `stores` and in its sink."""
    return reset_processor(
        stores.tokens,
        "p",
        TrackingToken(),
        now_ms=now_ms,
        claim_timeout_ms=claim_timeout_ms,
        sink=sink_stores.tokens,
    )


def _run_again_once_stopped(stores: Stores, sink_stores: Stores) -> ControlReceipt:
    """After a PartialResetError: the same reset is refused while the projection that took
    the sink's lease runs (the sink unchanged), and goes through once it stopped."""
    assert sink_stores.tokens.positions("p") == {"x": 3}
    with pytest.raises(UnableToClaimTokenError, match="'driver-1'"):
        _reset_with_sink(stores, sink_stores, now_ms=1)
    assert sink_stores.tokens.positions("p") == {"x": 3}
    sink_stores.tokens.release_projection_lease("p", "driver-1")
    return _reset_with_sink(stores, sink_stores, now_ms=2)
