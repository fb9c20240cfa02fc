"""Long lists of statement parameters cut into statements the drivers take."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

_T = TypeVar("_T")


def chunks(values: Sequence[_T], size: int) -> Iterator[Sequence[_T]]:
    """`values` in consecutive slices of at most `size`, in their order.

    One statement for every value of a long list went past what a statement takes (SQLite's
    32,766 parameters, PostgreSQL's 65,535); each caller sizes its slices to its statement's
    parameters per value. (itertools.batched is Python 3.12's.)
    """
    for start in range(0, len(values), size):
        yield values[start : start + size]
