"""The one JSON text form CDC stores: keys, cells, rows and states as compact JSON.

Keys are compared and hashed as text (routing, state buckets, the sink's key column), so every
writer must produce the same text for the same value: compact separators, ASCII escapes, the
given key order.

JSON has no NaN and no infinities, but Python's json module reads `NaN`, `Infinity` and
`-Infinity` (and turns `1e999` into an infinity) and writes them back. `parse_json` refuses all
of them, so mutations read from users or from the change log carry finite numbers only (from
users, and JSON documents captured, only numbers a double holds exactly: `exact_double`), and
`strict_json` refuses to write them, so nothing non-standard reaches the change log: every
reader downstream (Spark, a sink database, a message consumer) can parse what ordo wrote.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from ordo.documents import (
    NumberOutOfRangeError,
    exact_double,
    finite_double,
    json_integer,
    not_a_json_number,
)

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


_DECODER = json.JSONDecoder(parse_constant=not_a_json_number, parse_float=finite_double)
"""One decoder for every call: json.loads with arguments builds a new one each time."""


def parse_json(text: str) -> Any:
    """Standard JSON only: ValueError for NaN, infinities and numbers out of a double's range.

    A number out of range raises NumberOutOfRangeError, and malformed text json.JSONDecodeError
    as json.loads does (both ValueErrors).
    """
    return _DECODER.decode(text)


_APPLICATION_DECODER = json.JSONDecoder(
    parse_constant=not_a_json_number,
    parse_float=exact_double,
    parse_int=partial(json_integer, error=NumberOutOfRangeError),
)


def parse_application_json(text: str) -> Any:
    """`parse_json` of JSON an application stored, whose integers may be of any length.

    An integer longer than Python converts raises NumberOutOfRangeError too (`parse_json`
    raises a plain ValueError: its hot path leaves integers to the json module, and only
    captures read such text), and so does a number a double would round (`exact_double`: the
    change log holds doubles, which `parse_json` reads as they were written).
    """
    return _APPLICATION_DECODER.decode(text)
