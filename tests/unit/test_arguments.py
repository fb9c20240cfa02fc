"""The shared checks of plain argument values: the class is the caller's, the message the same."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sized
from functools import partial

import pytest

from ordo import arguments
from ordo.errors import ConfigurationError, InvalidInputError, MalformedMutationError


@pytest.mark.parametrize("value", [True, False, 1.0, "1", None, b"1"])
def test_an_integer_is_an_int_and_not_a_bool(value: object) -> None:
    with pytest.raises(InvalidInputError, match=f"^count must be an integer, got {value!r}$"):
        arguments.integer(value, name="count", error=InvalidInputError)


@pytest.mark.parametrize(
    ("value", "limits", "message"),
    [
        (2**63, {}, "is too large: at most 9223372036854775807 (2**63 - 1)"),
        (-(2**63) - 1, {}, "must be an integer >= -9223372036854775808 (-2**63)"),
        (0, {"minimum": 1}, "must be an integer >= 1"),
        (9, {"minimum": 0, "maximum": 8}, "is too large: at most 8"),
        (2**53, {"maximum": 2**53 - 1}, "is too large: at most 9007199254740991 (2**53 - 1)"),
    ],
)
def test_the_message_names_the_bound_crossed(
    value: int, limits: dict[str, int], message: str
) -> None:
    """The shared limits also say where they come from; the value is shown as given."""
    with pytest.raises(MalformedMutationError, match=re.escape(f"n {message}, got {value}")):
        arguments.integer(value, name="n", error=MalformedMutationError, **limits)


def test_the_error_may_be_a_factory() -> None:
    """Settings pass ConfigurationError bound to the setting, which loading uses to name it."""
    error = partial(ConfigurationError, setting="page_size")
    with pytest.raises(ConfigurationError) as raised:
        arguments.integer(0, name="page_size", error=error, minimum=1)
    assert raised.value.setting == "page_size"


def test_the_range_is_inclusive() -> None:
    for value in (arguments.INT64_MIN, 0, arguments.INT64_MAX):
        assert arguments.integer(value, name="n", error=InvalidInputError) == value


def test_an_instance_is_of_the_kind_named_a_class_or_a_runtime_protocol() -> None:
    arguments.instance(3, int, name="n", error=ConfigurationError)
    arguments.instance([], Iterable, name="ids", error=ConfigurationError)
    with pytest.raises(ConfigurationError, match=r"^reader must be an Iterable, got int: 3$"):
        arguments.instance(3, Iterable, name="reader", error=ConfigurationError)
    with pytest.raises(ConfigurationError, match=r"^n must be a Sized, got int: 3$"):
        arguments.instance(3, Sized, name="n", error=ConfigurationError)


@pytest.mark.parametrize("value", ["ab", b"ab", None, 5])
def test_a_collection_is_iterable_and_not_a_text(value: object) -> None:
    with pytest.raises(InvalidInputError, match=r"^ids must be a collection, got "):
        arguments.collection(value, name="ids", error=InvalidInputError)


def test_a_collection_is_returned_as_given() -> None:
    ids = (1, 2)
    assert arguments.collection(ids, name="ids", error=InvalidInputError) is ids
