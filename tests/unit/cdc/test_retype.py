"""A value after an accepted retype: the same value in the new type, or refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ordo.cdc.column_type import ColumnType, fits
from ordo.cdc.mutation import JsonValue
from ordo.cdc.retype import retyped_value


@pytest.mark.parametrize(
    ("value", "to", "expected"),
    [
        (5, ColumnType.STRING, "5"),
        (1.5, ColumnType.STRING, "1.5"),
        (True, ColumnType.STRING, "true"),
        ({"a": [1]}, ColumnType.STRING, '{"a":[1]}'),
        ("12", ColumnType.LONG, 12),
        (3.0, ColumnType.LONG, 3),
        (-(2.0**63), ColumnType.LONG, -(2**63)),
        (str(2**63 - 1), ColumnType.LONG, 2**63 - 1),
        ("1.5", ColumnType.DOUBLE, 1.5),
        (5, ColumnType.DOUBLE, 5),
        ("true", ColumnType.BOOLEAN, True),
        ("1.10", ColumnType.DECIMAL, "1.10"),
        ("2024-05-01", ColumnType.DATE, "2024-05-01"),
        ("abc", ColumnType.JSON, "abc"),
        (None, ColumnType.LONG, None),
    ],
)
def test_a_value_the_new_type_can_hold_converts(
    value: JsonValue, to: ColumnType, expected: JsonValue
) -> None:
    assert retyped_value(value, to) == expected


@pytest.mark.parametrize(
    ("value", "to"),
    [
        ("abc", ColumnType.LONG),
        ("1.5", ColumnType.LONG),
        (1.5, ColumnType.LONG),
        (2.0**63, ColumnType.LONG),
        (1e30, ColumnType.LONG),
        (str(2**63), ColumnType.LONG),
        (True, ColumnType.LONG),
        ("NaN", ColumnType.DOUBLE),
        ("yes", ColumnType.BOOLEAN),
        (1, ColumnType.BOOLEAN),
        ("abc", ColumnType.DECIMAL),
        ("abc", ColumnType.BYTES),
        (5, ColumnType.TIMESTAMP),
    ],
)
def test_a_value_it_cannot_hold_is_refused(value: JsonValue, to: ColumnType) -> None:
    with pytest.raises(ValueError, match=f"is not a {to.value}"):
        retyped_value(value, to)


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)


@given(_SCALARS, st.sampled_from(ColumnType))
def test_what_converts_fits_the_new_type(value: JsonValue, to: ColumnType) -> None:
    try:
        converted = retyped_value(value, to)
    except ValueError:
        return
    assert converted is None or fits(to, converted)
