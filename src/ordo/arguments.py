"""Checks of plain argument values that every layer shares: integers and collections.

Each public function that takes a count, an id, a position or a collection checks it with
these before it stores or uses it, and raises its own exception (the caller passes the class,
or a factory such as `partial(ConfigurationError, setting=name)`): the checks and their
messages are the same everywhere, the exception says what was refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ordo.errors import OrdoError

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
"""The range of the 64-bit integers both backends (and the change log's BIGINTs) store."""

LARGEST_INTEGER = 2**53 - 1
"""The largest integer a setting or option takes: every consumer holds it (SQLite's and
PostgreSQL's 64-bit integers, `timedelta` milliseconds, JSON readers), so a huge number is
refused where it is given rather than overflowing deep inside."""

_POWERS_OF_TWO = {INT64_MIN: "-2**63", INT64_MAX: "2**63 - 1", LARGEST_INTEGER: "2**53 - 1"}


def integer(
    value: object,
    *,
    name: str,
    error: Callable[[str], OrdoError],
    minimum: int = INT64_MIN,
    maximum: int = INT64_MAX,
) -> int:
    """`value` when it is an int in minimum..maximum; otherwise `error(message)` naming `name`.

    A bool is refused although it is an int: True was taken for 1 (segment 1, offset 1). A
    float or a text failed later as a TypeError naming nothing, or was stored (SQLite keeps
    1.5, PostgreSQL rounds it). The message names the argument, the value and the bound it
    crossed: `page_size must be an integer >= 1, got 0`, `page_size is too large: at most
    9007199254740991 (2**53 - 1), got 10**30`.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"{name} must be an integer, got {value!r:.80}"
        raise error(msg)
    if value < minimum:
        msg = f"{name} must be an integer >= {_bound(minimum)}, got {value}"
        raise error(msg)
    if value > maximum:
        msg = f"{name} is too large: at most {_bound(maximum)}, got {value}"
        raise error(msg)
    return value


def _bound(limit: int) -> str:
    """A limit as is, and the shared ones also as the power of two that says where they are from."""
    power = _POWERS_OF_TWO.get(limit)
    return str(limit) if power is None else f"{limit} ({power})"


def collection(value: object, *, name: str, error: Callable[[str], OrdoError]) -> Iterable[object]:
    """`value` when it is an iterable other than a text; otherwise `error` naming `name`.

    A str or bytes is refused although it is iterable: each character would be taken for an
    element. None or a number failed as a TypeError from iterating it.
    """
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        msg = f"{name} must be a collection, got {value!r:.80}"
        raise error(msg)
    return value
