"""Messages after an accepted retype: every column in the type of the version a message names."""

from __future__ import annotations

import pytest

from cdc_support import RETYPED as CATALOG
from cdc_support import fold_one_by_one, write
from ordo.cdc import ChangeMessage, Mutation
from ordo.errors import UnconvertibleValueError


def _fold(*mutations: Mutation) -> list[ChangeMessage]:
    """The messages of folding `mutations` one by one (each its own micro-batch)."""
    return fold_one_by_one(mutations, CATALOG.resolve)[1]


def test_a_message_shows_a_value_written_under_the_older_type_in_its_versions_type() -> None:
    messages = _fold(write(1, 11, n=5), write(2, 12, s="a"))

    assert [(m.schema_id, m.before, m.after) for m in messages] == [
        (11, None, {"id": 1, "n": 5, "s": None}),
        (12, {"id": 1, "n": "5", "s": None}, {"id": 1, "n": "5", "s": "a"}),
    ]


def test_a_message_of_the_older_version_shows_a_newer_value_in_the_older_type() -> None:
    """A late write naming version 1: its message conforms to version 1 too."""
    messages = _fold(write(1, 12, n="12"), write(2, 11, s="a"))

    assert messages[-1].schema_id == 11
    assert messages[-1].before == {"id": 1, "n": 12, "s": None}
    assert messages[-1].after == {"id": 1, "n": 12, "s": "a"}


def test_a_value_that_does_not_convert_stops_the_materializer_naming_it() -> None:
    """'abc', written under version 2 (string), is no long for a message of version 1."""
    with pytest.raises(UnconvertibleValueError) as stopped:
        _fold(write(1, 12, n="abc"), write(2, 11, s="a"))

    error = stopped.value
    assert (error.table, error.column, error.type, error.key, error.value) == (
        "t",
        "n",
        "long",
        (1,),
        "abc",
    )
    assert str(error) == (
        "table 't': the row with key (1,) holds 'abc' in column 'n', written under a schema "
        "version that typed the column otherwise, and it does not convert to a long, its type "
        "where it is to be shown; nothing was applied. Materialize the table afresh from a "
        "change log captured with --snapshot after the retype (see docs/cdc.md, 'Schemas')"
    )
