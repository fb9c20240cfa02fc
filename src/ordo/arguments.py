"""Checks of plain argument values that every layer shares: integers, collections, paths, times.

Each public function that takes a count, an id, a position or a collection checks it with
these before it stores or uses it, and raises its own exception (the caller passes the class,
or a factory such as `partial(ConfigurationError, setting=name)`): the checks and their
messages are the same everywhere, the exception says what was refused.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path

from ordo.errors import OrdoError

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
"""The range of the 64-bit integers both backends (and the change log's BIGINTs) store."""

LARGEST_INTEGER = 2**53 - 1
"""The largest integer a setting or option takes: every consumer holds it (SQLite's and
PostgreSQL's 64-bit integers, `timedelta` milliseconds, JSON readers), so a huge number is
refused where it is given rather than overflowing deep inside."""

_POWERS_OF_TWO = {INT64_MIN: "-2**63", INT64_MAX: "2**63 - 1", LARGEST_INTEGER: "2**53 - 1"}

_INTEGER_TEXT = re.compile(r"-?[0-9]+")

INTEGER_FORM = "plain digits 0-9, with a leading - for a negative number"
"""The one way an integer is written in an ORDO_* variable or on the command line, in words."""


def integer_text(text: str) -> int:
    """The integer `text` writes in plain ASCII digits, after an optional minus; else ValueError.

    The one form of every integer setting given as text (ORDO_* variables) and every integer
    option: int() also takes `1_000`, `+5`, ` 5 ` and other scripts' digits (Arabic-Indic and
    fullwidth fives, U+0665 and U+FF15), which a shell, a TOML reader or a person reads as
    something else or as no number, so one value had several meanings. Ranges are the caller's:
    a negative number is read here and refused there, as out of range, where it is meaningless.
    """
    if not _INTEGER_TEXT.fullmatch(text):
        msg = f"{text!r} is not an integer ({INTEGER_FORM})"
        raise ValueError(msg)
    return int(text)


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


def instance(value: object, kind: type, *, name: str, error: Callable[[str], OrdoError]) -> None:
    """Raise `error` naming `name` unless `value` is a `kind` (a class or a runtime Protocol).

    For a part handed to a constructor (settings, a reader): one of the wrong kind failed only
    where it was first used, as an AttributeError naming an attribute rather than the argument.
    The article follows the kind's first letter: "must be a EventSource" read as a slip.
    """
    if not isinstance(value, kind):
        article = "an" if kind.__name__[:1] in "AEIOU" else "a"
        msg = f"{name} must be {article} {kind.__name__}, got {type(value).__name__}: {value!r:.80}"
        raise error(msg)


def collection(value: object, *, name: str, error: Callable[[str], OrdoError]) -> Iterable[object]:
    """`value` when it is an iterable other than a text; otherwise `error` naming `name`.

    A str or bytes is refused although it is iterable: each character would be taken for an
    element. None or a number failed as a TypeError from iterating it.
    """
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        msg = f"{name} must be a collection, got {value!r:.80}"
        raise error(msg)
    return value


def mapping(
    value: object, *, name: str, error: Callable[[str], OrdoError]
) -> Mapping[object, object]:
    """`value` when it is a mapping; otherwise `error` naming `name`.

    None or a number failed as a TypeError from `in` or iteration, naming nothing; a text or a
    list passed for the environment was read as holding no variable at all.
    """
    if not isinstance(value, Mapping):
        msg = f"{name} must be a mapping, got {type(value).__name__}: {value!r:.80}"
        raise error(msg)
    return value


def path(value: object, *, name: str, error: Callable[[str], OrdoError]) -> Path:
    """`value` as a Path when it is a text or an `os.PathLike` of one; otherwise `error`.

    Anything else failed inside pathlib as a TypeError naming no argument, or as an
    AttributeError where a Path's method was called on a text. An empty text would be the
    current folder, and a NUL no file name holds: both are refused here too.
    """
    text = os.fspath(value) if isinstance(value, os.PathLike) else value
    if not isinstance(text, str) or not text or "\x00" in text:
        msg = f"{name} must be a file path (a non-empty str or os.PathLike), got {value!r:.80}"
        raise error(msg)
    return Path(text)


def aware_datetime(value: object, *, name: str, error: Callable[[str], OrdoError]) -> datetime:
    """`value` when it is a datetime with a zone; otherwise `error` naming `name`.

    A naive datetime's instant would be a guess (the local zone? UTC?), and subtracting an
    aware one from it was a TypeError; a date or a text failed as an AttributeError.
    """
    if not isinstance(value, datetime):
        msg = f"an aware datetime is needed for {name}, got {type(value).__name__}: {value!r:.80}"
        raise error(msg)
    if value.tzinfo is None or value.utcoffset() is None:
        msg = f"{name} {value.isoformat()} is naive; pass a timezone-aware datetime"
        raise error(msg)
    return value
