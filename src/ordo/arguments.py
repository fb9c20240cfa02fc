"""Checks of plain argument values that every layer shares: integers and collections.

Each public function that takes a count, an id, a position or a collection checks it with
these before it stores or uses it, and raises its own exception class (the caller passes it):
the checks and their messages are the same everywhere, the class says what was refused.
"""

from __future__ import annotations

from collections.abc import Iterable

from ordo.errors import OrdoError

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
"""The range of the 64-bit integers both backends (and the change log's BIGINTs) store."""


def integer(
    value: object,
    *,
    name: str,
    error: type[OrdoError],
    minimum: int = INT64_MIN,
    maximum: int = INT64_MAX,
) -> int:
    """`value` when it is an int in minimum..maximum; otherwise `error` naming `name`.

    A bool is refused although it is an int: True was taken for 1 (segment 1, offset 1). A
    float or a text failed later as a TypeError naming nothing, or was stored (SQLite keeps
    1.5, PostgreSQL rounds it). The message names the argument, the value and the range.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"{name} must be an integer, got {value!r:.80}"
        raise error(msg)
    if not minimum <= value <= maximum:
        msg = f"{name} must be in {_bound(minimum)}..{_bound(maximum)}, got {value}"
        raise error(msg)
    return value


def _bound(limit: int) -> str:
    """The 64-bit limits as powers of two, which say where they come from; others as is."""
    return {INT64_MIN: "-2**63", INT64_MAX: "2**63-1"}.get(limit, str(limit))


def collection(value: object, *, name: str, error: type[OrdoError]) -> Iterable[object]:
    """`value` when it is an iterable other than a text; otherwise `error` naming `name`.

    A str or bytes is refused although it is iterable: each character would be taken for an
    element. None or a number failed as a TypeError from iterating it.
    """
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        msg = f"{name} must be a collection, got {value!r:.80}"
        raise error(msg)
    return value
