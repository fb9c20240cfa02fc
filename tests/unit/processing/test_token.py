"""Tracking tokens: the stored form, and the parts ahead that a merge keeps."""

from __future__ import annotations

import pytest

from ordo.errors import InvalidInputError, OffsetFormatError
from ordo.processing.segment import Segment
from ordo.processing.token import PartAhead, TrackingToken
from ordo.time import TimeUUID

T1 = TimeUUID.parse("5f1a2c10-e5f0-11f1-8000-000000000001")
T2 = TimeUUID.parse("6f1a2c10-e5f0-11f1-8000-000000000001")
T3 = TimeUUID.parse("7f1a2c10-e5f0-11f1-8000-000000000001")
LOW, HIGH = Segment(0, 1), Segment(1, 1)


@pytest.mark.parametrize(
    "token",
    [
        TrackingToken(),
        TrackingToken(T1),
        TrackingToken(T1, (PartAhead(HIGH, T2), PartAhead(Segment(2, 3), T3))),
        TrackingToken(None, (PartAhead(HIGH, T2),)),
    ],
)
def test_a_token_reads_back_what_it_stored(token: TrackingToken) -> None:
    assert TrackingToken.from_json(token.to_json()) == token


def test_a_token_without_parts_ahead_keeps_the_first_stored_form() -> None:
    assert TrackingToken(T1).to_json() == f'{{"v": 1, "offset": "{T1}"}}'


@pytest.mark.parametrize("text", ["{}", "[]", '{"offset": null, "ahead": [[1]]}', "x"])
def test_a_damaged_token_is_refused(text: str) -> None:
    with pytest.raises(OffsetFormatError):
        TrackingToken.from_json(text)


@pytest.mark.parametrize("offset", [str(T1), T1.key, T1.uuid, 0])
def test_an_offset_that_is_not_a_timeuuid_is_refused(offset: object) -> None:
    """A string offset was accepted, and failed only where the token was used."""
    with pytest.raises(InvalidInputError, match="must be a TimeUUID"):
        TrackingToken(offset)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "ahead",
    [None, [PartAhead(HIGH, T2)], "abc", (HIGH,), (PartAhead(HIGH, str(T2)),), (PartAhead(1, T2),)],  # type: ignore[arg-type]
)
def test_parts_ahead_that_are_not_a_tuple_of_parts_are_refused(ahead: object) -> None:
    """They were accepted, and failed only where the token was stored (AttributeError)."""
    with pytest.raises(InvalidInputError, match="ahead must be a tuple of PartAhead"):
        TrackingToken(T1, ahead)  # type: ignore[arg-type]


def test_a_merge_resumes_from_the_lower_half_and_keeps_the_higher_as_a_part_ahead() -> None:
    merged = TrackingToken(T1).merged(LOW, TrackingToken(T2), HIGH)
    assert merged == TrackingToken(T1, (PartAhead(HIGH, T2),))
    assert merged == TrackingToken(T2).merged(HIGH, TrackingToken(T1), LOW)


def test_equal_halves_or_a_half_that_never_ran_keep_no_useless_part() -> None:
    assert TrackingToken(T1).merged(LOW, TrackingToken(T1), HIGH) == TrackingToken(T1)
    assert TrackingToken().merged(LOW, TrackingToken(), HIGH) == TrackingToken()
    assert TrackingToken(T1).merged(LOW, TrackingToken(), HIGH) == TrackingToken(
        None, (PartAhead(LOW, T1),)
    )


def test_parts_ahead_of_both_halves_survive_a_merge_until_the_offset_passes_them() -> None:
    inner = TrackingToken(T1, (PartAhead(Segment(3, 3), T3),))
    merged = inner.merged(HIGH, TrackingToken(T2), LOW)
    assert merged == TrackingToken(T1, (PartAhead(Segment(3, 3), T3), PartAhead(LOW, T2)))
    assert merged.advanced_to(T2) == TrackingToken(T2, (PartAhead(Segment(3, 3), T3),))
    assert merged.advanced_to(T3) == TrackingToken(T3)


@pytest.mark.parametrize(
    ("token", "reached"),
    [
        (TrackingToken(), None),
        (TrackingToken(T1), T1),
        (TrackingToken(T1, (PartAhead(Segment(3, 3), T3), PartAhead(LOW, T2))), T3),
        (TrackingToken(None, (PartAhead(HIGH, T2),)), T2),
    ],
)
def test_a_token_reached_the_furthest_offset_of_its_own_and_its_parts_ahead(
    token: TrackingToken, reached: TimeUUID | None
) -> None:
    assert token.reached == reached
