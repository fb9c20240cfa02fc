"""The mutation dataclasses refuse values the change log cannot store, where they are built."""

from __future__ import annotations

import pytest

from ordo.cdc import Cell
from ordo.errors import MalformedMutationError


@pytest.mark.parametrize("write_time", ["x", 1.5, True, None, 2**63, -(2**63) - 1])
def test_a_cell_write_time_that_is_no_bigint_is_refused(write_time: object) -> None:
    with pytest.raises(MalformedMutationError, match=r"^cell write_time must be"):
        Cell(value=1, write_time=write_time)  # type: ignore[arg-type]


@pytest.mark.parametrize("ttl_s", ["5", 2.0, True, 0, -1, 2**63])
def test_a_cell_ttl_that_is_no_positive_bigint_is_refused(ttl_s: object) -> None:
    with pytest.raises(MalformedMutationError, match=r"^cell ttl_s must be"):
        Cell(value=1, write_time=1, ttl_s=ttl_s)  # type: ignore[arg-type]


def test_a_cell_takes_the_whole_bigint_range() -> None:
    assert Cell(value=1, write_time=-(2**63), ttl_s=2**63 - 1).ttl_s == 2**63 - 1
