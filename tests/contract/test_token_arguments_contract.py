"""The token store contract: bad names, numbers and requests are refused alike, changing nothing."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ordo.errors import ConfigurationError, InvalidIdentifierError, InvalidInputError
from ordo.processing.control import (
    ControlReceipt,
    merge_segment,
    release_segment,
    reset_processor,
    split_segment,
)
from ordo.processing.segment_request import SegmentAction, SegmentRequest
from ordo.processing.token import TrackingToken
from ordo.storage.stores import Stores
from token_support import T1, TIMEOUT
from token_support import segments as _segments


@pytest.mark.parametrize("name", ["", "a\x00b", "p" * 256, 5])
def test_a_processor_name_must_be_an_identifier(stores: Stores, name: object) -> None:
    with pytest.raises(InvalidIdentifierError, match="processor name"):
        stores.tokens.initialize(name, segment_count=1)  # type: ignore[arg-type]
    assert stores.tokens.processors() == []


@pytest.mark.parametrize("name", ["", "a\x00b", "p\ud800", 5])
def test_the_reads_and_operator_actions_check_the_processor_name(
    stores: Stores, name: object
) -> None:
    """Alike on both backends: a NUL was UnknownProcessorError or a StorageError."""
    stores.tokens.initialize("p", segment_count=1)
    bad: str = name  # type: ignore[assignment]
    for call in (
        lambda: stores.tokens.entries(bad),
        lambda: stores.tokens.pending_requests(bad),
        lambda: stores.tokens.dead_letters(bad),
        lambda: stores.tokens.positions(bad),
        lambda: stores.tokens.reset(bad, TrackingToken(), now_ms=0, claim_timeout_ms=TIMEOUT),
        lambda: split_segment(stores.tokens, bad, 0, now_ms=0, claim_timeout_ms=TIMEOUT),
    ):
        with pytest.raises(InvalidIdentifierError, match="processor name"):
            call()
    assert _segments(stores) == [(0, 0)]


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"segment_id": "0"}, "segment_id"),
        ({"segment_id": True}, "segment_id"),
        ({"now_ms": None}, "now_ms"),
        ({"now_ms": 1.5}, "now_ms"),
        ({"now_ms": 2**64}, "now_ms"),
        ({"claim_timeout_ms": -1}, "claim_timeout_ms"),
        ({"claim_timeout_ms": 2**63}, "claim_timeout_ms"),
    ],
)
@pytest.mark.parametrize("action", [split_segment, merge_segment, release_segment])
def test_operator_actions_refuse_bad_numbers_and_change_nothing(
    stores: Stores,
    action: Callable[..., ControlReceipt],
    arguments: dict[str, object],
    named: str,
) -> None:
    """None was a TypeError mid-claim; 2**64 SQLite's OverflowError, PostgreSQL's StorageError."""
    stores.tokens.initialize("p", segment_count=2)
    call = {"segment_id": 1, "now_ms": 0, "claim_timeout_ms": TIMEOUT, **arguments}
    segment_id = call.pop("segment_id")

    with pytest.raises(InvalidInputError, match=named):
        action(stores.tokens, "p", segment_id, **call)
    assert _segments(stores) == [(0, 1), (1, 1)]
    assert stores.tokens.pending_requests("p") == []


@pytest.mark.parametrize("action", [split_segment, merge_segment, release_segment])
def test_operator_actions_refuse_a_token_store_of_another_kind(
    action: Callable[..., ControlReceipt],
) -> None:
    """An AttributeError (no entries()) before."""
    with pytest.raises(ConfigurationError, match=r"^tokens must be a TokenStore, got 'sqlite:"):
        action("sqlite:///j.db", "p", 0, now_ms=0, claim_timeout_ms=TIMEOUT)


def test_reset_refuses_a_sink_of_another_kind_and_changes_nothing(stores: Stores) -> None:
    """The sink's AttributeError came once the journal's tokens had been checked."""
    stores.tokens.initialize("p", segment_count=1)
    with pytest.raises(
        ConfigurationError,
        match=r"^sink must be a TokenStore \(with check_reset\(\) and reset\(\)\), got 'sqlite:",
    ):
        reset_processor(
            stores.tokens,
            "p",
            TrackingToken(T1),
            now_ms=0,
            claim_timeout_ms=TIMEOUT,
            sink="sqlite:///sink.db",  # type: ignore[arg-type]
        )
    assert stores.tokens.entries("p")[0].token == TrackingToken()


@pytest.mark.parametrize("token", [None, "5f1a2c10-e5f0-11f1-8000-000000000001", T1])
def test_reset_refuses_what_is_not_a_tracking_token(stores: Stores, token: object) -> None:
    stores.tokens.initialize("p", segment_count=1)
    with pytest.raises(InvalidInputError, match="TrackingToken"):
        reset_processor(stores.tokens, "p", token, now_ms=0, claim_timeout_ms=TIMEOUT)  # type: ignore[arg-type]
    assert stores.tokens.entries("p")[0].token == TrackingToken()


@pytest.mark.parametrize(
    ("arguments", "error", "named"),
    [
        ({"segment_id": True}, InvalidInputError, "segment_id"),
        ({"segment_id": "1"}, InvalidInputError, "segment_id"),
        ({"segment_id": 1.0}, InvalidInputError, "segment_id"),
        ({"segment_id": 2**64}, InvalidInputError, "segment_id"),
        ({"owner": None}, InvalidIdentifierError, "owner"),
        ({"owner": ""}, InvalidIdentifierError, "owner"),
        ({"owner": 5}, InvalidIdentifierError, "owner"),
        ({"owner": "a\x00b"}, InvalidIdentifierError, "owner"),
        ({"processor": 5}, InvalidIdentifierError, "processor name"),
        ({"now_ms": float("nan")}, InvalidInputError, "now_ms"),
        ({"now_ms": 1.5}, InvalidInputError, "now_ms"),
        ({"now_ms": None}, InvalidInputError, "now_ms"),
        ({"claim_timeout_ms": "10"}, InvalidInputError, "claim_timeout_ms"),
    ],
)
def test_a_claim_refuses_bad_arguments_and_changes_nothing(
    stores: Stores, arguments: dict[str, object], error: type[Exception], named: str
) -> None:
    """Alike on both backends, before any statement.

    True claimed segment 1 and "1" or 1.0 claimed it too on SQLite, NaN stored a claim with no
    time; owners and processors of the wrong type or with a NUL were PostgreSQL StorageErrors.
    """
    stores.tokens.initialize("p", segment_count=2)
    call = {"processor": "p", "segment_id": 1, "owner": "a", "now_ms": 0}
    call.update({"claim_timeout_ms": TIMEOUT, **arguments})

    with pytest.raises(error, match=named):
        stores.tokens.claim(**call)  # type: ignore[arg-type]
    assert [(e.owner, e.claimed_at_ms) for e in stores.tokens.entries("p")] == [(None, None)] * 2


def test_the_other_segment_operations_check_their_arguments(stores: Stores) -> None:
    stores.tokens.initialize("p", segment_count=2)
    stores.tokens.claim("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    bad: str = None  # type: ignore[assignment]
    split = SegmentRequest(action=SegmentAction.SPLIT)
    for call, named in (
        (lambda: stores.tokens.release("p", "0", "a"), "segment_id"),  # type: ignore[arg-type]
        (lambda: stores.tokens.release("p", 0, bad), "owner"),
        (lambda: stores.tokens.split("p", True, "a"), "segment_id"),
        (lambda: stores.tokens.merge("p", 0, "a", now_ms=bad, claim_timeout_ms=1), "now_ms"),  # type: ignore[arg-type]
        (lambda: stores.tokens.take_request("p", bad), "segment_id"),  # type: ignore[arg-type]
        (lambda: stores.tokens.take_request("p", 0, actions={"split"}), "SegmentAction"),  # type: ignore[arg-type]
        (
            lambda: stores.tokens.hand_over("p", 0, "a", to="", now_ms=0, claim_timeout_ms=1),
            "to",
        ),
        (
            lambda: stores.tokens.hand_over("p", 0, "a", to="b", now_ms=0, claim_timeout_ms=bad),  # type: ignore[arg-type]
            "claim_timeout_ms",
        ),
        (lambda: stores.tokens.request("p", 0, split, now_ms=bad), "now_ms"),  # type: ignore[arg-type]
        (lambda: stores.tokens.request("p", 0, "split", now_ms=0), "SegmentRequest"),  # type: ignore[arg-type]
        (lambda: stores.tokens.batch("p", 0, "a", mask="1").__enter__(), "mask"),  # type: ignore[arg-type]
        (lambda: stores.tokens.handled("p", after="", up_to=b""), "after"),  # type: ignore[arg-type]
        (lambda: stores.tokens.forget_handled("p", 0, "a", before=bad), "before"),  # type: ignore[arg-type]
        (lambda: stores.tokens.forget_handled("p", bad, "a", before=b""), "segment_id"),  # type: ignore[arg-type]
        (
            lambda: stores.tokens.reset("p", TrackingToken(), now_ms=bad, claim_timeout_ms=1),  # type: ignore[arg-type]
            "now_ms",
        ),
    ):
        with pytest.raises(InvalidInputError, match=named):
            call()
    assert [(e.segment.segment_id, e.owner) for e in stores.tokens.entries("p")] == [
        (0, "a"),
        (1, None),
    ]
    assert stores.tokens.pending_requests("p") == []


def test_a_request_with_a_time_that_is_no_integer_is_refused_not_stored(stores: Stores) -> None:
    """SQLite stored "x", and every later pending_requests (processor status) failed on it."""
    stores.tokens.initialize("p", segment_count=1)
    split = SegmentRequest(action=SegmentAction.SPLIT)
    with pytest.raises(InvalidInputError, match="now_ms"):
        stores.tokens.request("p", 0, split, now_ms="x")  # type: ignore[arg-type]
    assert stores.tokens.pending_requests("p") == []


def test_a_hand_over_request_must_name_the_new_owner(stores: Stores) -> None:
    """One with none was stored, and its owner took it and did nothing."""
    stores.tokens.initialize("p", segment_count=1)
    nobody = SegmentRequest(action=SegmentAction.HAND_OVER)
    with pytest.raises(InvalidIdentifierError, match="target_owner"):
        stores.tokens.request("p", 0, nobody, now_ms=0)
    assert stores.tokens.take_request("p", 0) is None
