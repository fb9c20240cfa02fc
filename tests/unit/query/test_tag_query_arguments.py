"""TagQuery is public: each wrong argument is refused by its constructor, naming it.

Before, one failed deep inside as an AttributeError or TypeError naming nothing, or was taken
as given (a tag of None, is_live="no", a known position of "3").
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from ordo.errors import (
    ConfigurationError,
    InvalidIdentifierError,
    InvalidInputError,
    OffsetFormatError,
)
from ordo.query import NO_OFFSET, TagQuery
from tag_view_doubles import BUCKET_SIZE, EPOCH_MS, TAG, InMemoryTagView, at, offset_at, settings


def _arguments(**overrides: object) -> dict[str, Any]:
    values: dict[str, Any] = {
        "reader": InMemoryTagView(),
        "tag": TAG,
        "offset": NO_OFFSET,
        "settings": settings(),
        "bucket_size": BUCKET_SIZE,
        "first_time_bucket_ms": EPOCH_MS,
        "now_ns": at(1_000),
        "is_live": True,
    }
    values.update(overrides)
    return values


def _start(**overrides: object) -> TagQuery[Any]:
    arguments = _arguments(**overrides)
    return TagQuery(arguments.pop("reader"), **arguments)


@pytest.mark.parametrize(
    ("argument", "value", "error", "message"),
    [
        ("reader", None, ConfigurationError, "reader must be a TagViewReader, got NoneType"),
        ("runs", object(), ConfigurationError, "runs must be a RunReader, got object"),
        ("tag", None, InvalidIdentifierError, "tag must be a string, got NoneType"),
        ("tag", "", InvalidIdentifierError, "tag must not be empty"),
        ("offset", None, OffsetFormatError, "offset must be NoOffset or a TimeUUID"),
        ("offset", str(offset_at(0)), OffsetFormatError, "offset must be NoOffset or a TimeUUID"),
        ("settings", None, ConfigurationError, "settings must be a QuerySettings, got NoneType"),
        ("bucket_size", "minute", ConfigurationError, "bucket_size must be a BucketSize, got str"),
        ("first_time_bucket_ms", 1.5, InvalidInputError, "first_time_bucket_ms must be an integ"),
        ("now_ns", None, InvalidInputError, "now_ns must be an integer, got None"),
        ("now_ns", float(at(1_000)), InvalidInputError, "now_ns must be an integer, got "),
        ("is_live", "no", ConfigurationError, "is_live must be True or False, got 'no'"),
        ("known", [("a", 1)], InvalidInputError, "known must be a mapping, got list"),
    ],
)
def test_a_wrong_argument_is_refused_naming_it(
    argument: str, value: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match="^" + re.escape(message)) as caught:
        _start(**{argument: value})
    assert type(caught.value) is error


def test_an_argument_is_checked_even_when_the_query_would_not_use_it() -> None:
    """A first_time_bucket_ms of 1.5 went unnoticed when the query started from an offset."""
    with pytest.raises(InvalidInputError, match=r"^first_time_bucket_ms must be an integer"):
        _start(offset=offset_at(0), first_time_bucket_ms=1.5)


def test_right_arguments_start_a_query_that_delivers() -> None:
    view = InMemoryTagView()
    query = _start(reader=view, known={"a": 0}, is_live=False)
    assert query.poll(at(1_000)).is_complete
