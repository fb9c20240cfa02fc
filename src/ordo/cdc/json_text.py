"""The one JSON text form CDC stores: keys, cells, rows and states as compact JSON.

Keys are compared and hashed as text (routing, state buckets, the sink's key column), so every
writer must produce the same text for the same value: compact separators, ASCII escapes, the
given key order.

JSON has no NaN and no infinities, but Python's json module reads `NaN`, `Infinity` and
`-Infinity` (and turns `1e999` into an infinity) and writes them back. `parse_json` refuses all
of them, so mutations read from users or from the change log carry finite numbers only (from
users, and JSON documents captured, only numbers a double holds exactly: `_exact`), and
`strict_json` refuses to write them, so nothing non-standard reaches the change log: every
reader downstream (Spark, a sink database, a message consumer) can parse what ordo wrote.
"""

from __future__ import annotations

import json
import math
import sys
from decimal import Decimal
from typing import Any

from ordo.documents import document_decoder

compact_json = json.JSONEncoder(separators=(",", ":")).encode
"""Compact JSON with one encoder for every call (json.dumps with options builds one per call)."""

_STRICT_ENCODE = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
_UNICODE_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def strict_json(value: Any) -> str:
    r"""`compact_json` that raises ValueError for NaN, infinities and lone surrogates.

    The text is the same otherwise. It is ASCII, with every character outside the Basic
    Multilingual Plane escaped as a surrogate pair, so a lone surrogate (`"\ud800"`, which
    Python strings and JSON escapes can hold) was stored, and no reader could write the string
    it decodes to as UTF-8: a sink database refused it at every restart. The text is checked
    as readers decode it (a pair of surrogates in a Python string is the character it stands
    for), and only when it holds a `\ud` escape, so other text costs one substring search.
    """
    text = _STRICT_ENCODE(value)
    if "\\ud" in text:
        try:
            _UNICODE_ENCODE(parse_json(text)).encode("utf-8")
        except UnicodeEncodeError as exc:
            msg = f"{text[:200]} holds a lone surrogate, which is no Unicode text"
            raise ValueError(msg) from exc
    return text


def _no_constant(name: str) -> Any:
    """`parse_json`'s answer to `NaN`, `Infinity` and `-Infinity`: they are not JSON."""
    msg = f"{name} is not a JSON number (JSON has no NaN or infinities)"
    raise ValueError(msg)


class NumberOutOfRangeError(ValueError):
    """JSON text holding a number ordo cannot carry: beyond a double's range (`1e999`).

    In JSON an application stored, a number a double would round (`0.10000000000000000001`)
    too (in a mutation line as well), and an integer longer than Python converts. Unlike NaN or
    a malformed document it is valid JSON, which an application may have stored in a JSON
    column: captures tell the two apart to say why such a value was set aside.
    """


def _finite(text: str) -> float:
    """A JSON number with a fraction or exponent, refused when a double cannot hold it."""
    number = float(text)
    if math.isinf(number):
        msg = f"number {text} is out of the range of a double"
        raise NumberOutOfRangeError(msg)
    return number


_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite)
"""One decoder for every call: json.loads with arguments builds a new one each time."""


def parse_json(text: str) -> Any:
    """Standard JSON only: ValueError for NaN, infinities and numbers out of a double's range.

    A number out of range raises NumberOutOfRangeError, and malformed text json.JSONDecodeError
    as json.loads does (both ValueErrors).
    """
    return _DECODER.decode(text)


def _integer(text: str) -> int:
    """A JSON integer, refused when it is longer than Python converts (it could not write it)."""
    try:
        return int(text)
    except ValueError as exc:  # more digits than sys.get_int_max_str_digits()
        digits = len(text.lstrip("-"))
        msg = f"integer of {digits} digits is longer than {sys.get_int_max_str_digits()}"
        raise NumberOutOfRangeError(msg) from exc


_ALWAYS_EXACT = 16
"""The longest JSON fraction without an exponent `_exact` need not check: 15 digits and a dot."""


def _exact(text: str) -> float:
    """`_finite`, refused too when the double is another number than `text` says.

    ordo reads JSON as doubles, and every reader after the change log (messages, sinks, Spark)
    gets the double's shortest text: `0.10000000000000000001` arrived as 0.1 and `1e-400` as
    0.0, a value the application or producer never wrote, without a word. Refused, the capture
    sets the document aside and the materializer dead-letters its change naming the column
    (Debezium carries such text as it is; a user expects no silent change), and `ordo cdc
    ingest` refuses the line (`USER_JSON_DECODER`). Another spelling of the same number
    (`1E+2`, `1.50`) is carried.

    Every line of an ingest reads its numbers here, so the common ones are let through on the
    cheapest check that proves them exact (a repr cost more than the float it checks): a text
    of at most `_ALWAYS_EXACT` characters without an exponent has at most 15 significant digits
    (it holds a dot) and lies within a double's normal range, and every such number is the
    double's shortest text (a double tells 15 digits apart). Of the others, the shortest text
    equals `text` for most, so only the rest are compared as decimals.
    """
    number = _finite(text)
    if len(text) <= _ALWAYS_EXACT and "e" not in text and "E" not in text:
        return number
    shortest = repr(number)
    if shortest != text and Decimal(shortest) != Decimal(text):
        msg = f"number {text} is rounded to {shortest} as a double"
        raise NumberOutOfRangeError(msg)
    return number


USER_JSON_DECODER = document_decoder(parse_constant=_no_constant, parse_float=_exact)
"""`parse_json`'s numbers for JSON a user wrote (mutation lines), read with `decode_json`:
duplicate keys, integers longer than Python converts and numbers a double would round
(`_exact`, as captures refuse them) are refused too."""

_APPLICATION_DECODER = json.JSONDecoder(
    parse_constant=_no_constant, parse_float=_exact, parse_int=_integer
)


def parse_application_json(text: str) -> Any:
    """`parse_json` of JSON an application stored, whose integers may be of any length.

    An integer longer than Python converts raises NumberOutOfRangeError too (`parse_json`
    raises a plain ValueError: its hot path leaves integers to the json module, and only
    captures read such text), and so does a number a double would round (`_exact`: the change
    log holds doubles, which `parse_json` reads as they were written).
    """
    return _APPLICATION_DECODER.decode(text)
