"""The shared checks of plain argument values: the class is the caller's, the message the same."""

from __future__ import annotations

import pytest

from ordo import arguments
from ordo.errors import InvalidInputError, MalformedMutationError


@pytest.mark.parametrize("value", [True, False, 1.0, "1", None, b"1"])
def test_an_integer_is_an_int_and_not_a_bool(value: object) -> None:
    with pytest.raises(InvalidInputError, match=f"^count must be an integer, got {value!r}$"):
        arguments.integer(value, name="count", error=InvalidInputError)


@pytest.mark.parametrize(
    ("value", "limits", "message"),
    [
        (2**63, {}, r"-2\*\*63\.\.2\*\*63-1, got 9223372036854775808"),
        (-(2**63) - 1, {}, r"-2\*\*63\.\.2\*\*63-1, got -9223372036854775809"),
        (0, {"minimum": 1}, r"1\.\.2\*\*63-1, got 0"),
        (9, {"minimum": 0, "maximum": 8}, r"0\.\.8, got 9"),
    ],
)
def test_the_message_names_the_range(value: int, limits: dict[str, int], message: str) -> None:
    with pytest.raises(MalformedMutationError, match=f"^n must be in {message}$"):
        arguments.integer(value, name="n", error=MalformedMutationError, **limits)


def test_the_range_is_inclusive() -> None:
    for value in (arguments.INT64_MIN, 0, arguments.INT64_MAX):
        assert arguments.integer(value, name="n", error=InvalidInputError) == value


@pytest.mark.parametrize("value", ["ab", b"ab", None, 5])
def test_a_collection_is_iterable_and_not_a_text(value: object) -> None:
    with pytest.raises(InvalidInputError, match=r"^ids must be a collection, got "):
        arguments.collection(value, name="ids", error=InvalidInputError)


def test_a_collection_is_returned_as_given() -> None:
    ids = (1, 2)
    assert arguments.collection(ids, name="ids", error=InvalidInputError) is ids
