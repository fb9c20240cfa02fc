"""Checks shared by every reader of hand-written documents: JSON lines, TOML files, options.

Optional keys are read with `.get`, so a misspelt one ("ttl" for "ttl_s") would otherwise be
dropped without a word and the document taken to say something it does not. Every reader
refuses unknown keys the same way, with the same message.
"""

from __future__ import annotations

import difflib
import json
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import Any

from ordo.errors import OrdoError

BYTE_ORDER_MARK = "\ufeff"
"""What editors on Windows put at the start of a UTF-8 file, and readers skip: the json module
refused it ("Expecting value: line 1 column 1"), tomllib as an invalid statement."""

USER_TEXT_ENCODING = "utf-8-sig"
"""The encoding of a file a user wrote, read whole: UTF-8, a `BYTE_ORDER_MARK` at its start
skipped (a stream read line by line skips it from its first line)."""


def unknown_names_message(
    unknown: Sequence[str],
    valid: Iterable[str],
    *,
    where: str,
    noun: str = "key",
    suggest: bool = False,
    note: str = "",
) -> str:
    """`<where> has unknown key(s) 'a', 'b' (valid keys: x, y)`, with `noun` for "key".

    With `suggest`, each unknown name is followed by the valid one it is closest to, compared
    without case (`'maxeventspertriger' (did you mean maxEventsPerTrigger?)`); `note` goes
    after the names, before the valid ones.
    """
    names = list(valid)
    by_lower_case = {name.lower(): name for name in names}
    shown = []
    for name in unknown:
        close = difflib.get_close_matches(name.lower(), by_lower_case, n=1) if suggest else []
        hint = f" (did you mean {by_lower_case[close[0]]}?)" if close else ""
        shown.append(f"{name!r}{hint}")
    plural = "s" if len(unknown) > 1 else ""
    return (
        f"{where} has unknown {noun}{plural} {', '.join(shown)}{f'; {note}' if note else ''} "
        f"(valid {noun}s: {', '.join(names)})"
    )


def reject_unknown_keys(
    document: Iterable[str],
    valid: Sequence[str],
    *,
    where: str,
    error: type[OrdoError],
    noun: str = "key",
) -> None:
    """Raise `error` naming the keys of `document` that are not in `valid` (in document order)."""
    unknown = [key for key in document if key not in valid]
    if unknown:
        raise error(unknown_names_message(unknown, valid, where=where, noun=noun))


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The object of `pairs`, refused when a key comes twice (the json module keeps the last)."""
    document = dict(pairs)
    if len(document) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                msg = f"duplicate key {key!r}"
                raise ValueError(msg)
            seen.add(key)
    return document


def json_integer(text: str, error: type[ValueError] = ValueError) -> int:
    """A JSON integer, refused with `error` in the reader's words when longer than Python converts.

    The json module's own error advised `sys.set_int_max_str_digits()`, which no user of the
    command line can call. A user's line is refused as invalid JSON (ValueError); JSON an
    application stored raises NumberOutOfRangeError, which captures set aside (ordo.cdc.json_text).
    """
    try:
        return int(text)
    except ValueError as exc:
        digits = len(text.lstrip("-"))
        msg = f"integer too long ({digits:,} digits, at most {sys.get_int_max_str_digits():,})"
        raise error(msg) from exc


def document_decoder(
    *,
    parse_float: Callable[[str], Any] = float,
    parse_constant: Callable[[str], Any] | None = None,
) -> json.JSONDecoder:
    """A decoder of JSON a user wrote, for `decode_json`: build one per module, not per call.

    A key given twice in one object is refused (the json module kept the last, so a line with
    two "payload" keys was appended with the second and no word), and so is an integer longer
    than Python converts, in words a user can act on. `parse_float` and `parse_constant` are
    the json module's (a reader that refuses NaN passes its own).
    """
    return json.JSONDecoder(
        object_pairs_hook=_unique_keys,
        parse_int=json_integer,
        parse_float=parse_float,
        parse_constant=parse_constant,
    )


_DOCUMENT_DECODER = document_decoder()


def not_a_json_number(name: str) -> Any:
    """The `parse_constant` of standard JSON: `NaN`, `Infinity` and `-Infinity` are not JSON.

    Python's json module reads them (and writes them back), so a reader that passes no
    `parse_constant` lets them into what it stores, where no other reader can parse them.
    """
    msg = f"{name} is not a JSON number (JSON has no NaN or infinities)"
    raise ValueError(msg)


class NumberOutOfRangeError(ValueError):
    """JSON text holding a number ordo cannot carry: beyond a double's range (`1e999`).

    In JSON an application stored, a number a double would round (`0.10000000000000000001`)
    too (in a mutation or event line as well), and an integer longer than Python converts.
    Unlike NaN or a malformed document it is valid JSON, which an application may have stored
    in a JSON column: captures tell the two apart to say why such a value was set aside, and
    `ordo append` to say what is wrong with a line that is JSON.
    """


def finite_double(text: str) -> float:
    """A JSON number with a fraction or exponent, refused when a double cannot hold it."""
    number = float(text)
    if math.isinf(number):
        msg = f"number {text} is out of the range of a double"
        raise NumberOutOfRangeError(msg)
    return number


_SHAPES = bytes(
    ord("0") if byte in b"0123456789." else ord("e") if byte in b"eE" else ord(" ")
    for byte in range(256)
)
"""Text's bytes mapped to the shape of its numbers: digits and points as "0", "e" as "e"."""
_MAY_ROUND = (b"0" * 16, b"e000", b"e 000")
"""Shapes of numbers a double may round, found by a substring search in the shape
(bytes.translate): every such number has 16 digits or points (leading and trailing zeros
count: `0.000000000000001`) or a three-digit exponent (beyond 1e99 or 1e-99)."""


def may_round(text: str) -> bool:
    """Whether `text`, a JSON number or a document, may hold a number a double would round.

    The one rule of which numbers are a double's without a look at the double: a number of at
    most 15 significant digits and an exponent of at most two lies within a double's normal
    range and is the double's shortest text (a double tells 15 digits apart), and a text
    without the `_MAY_ROUND` shapes holds no other. Other text may be taken for a number
    (a string of 16 digits): it costs only a closer look (`exact_double`).
    """
    shape = text.encode("utf-8", "surrogatepass").translate(_SHAPES)
    return any(part in shape for part in _MAY_ROUND)


def exact_double(text: str) -> float:
    """`finite_double`, refused too when the double is another number than `text` says.

    ordo reads JSON as doubles, and every reader after it (an event's payload, the change log's
    messages, sinks, Spark) gets the double's shortest text: `0.10000000000000000001` arrived as
    0.1 and `1e-400` as 0.0, a value the application, producer or user never wrote, without a
    word. Refused, the capture sets the document aside and the materializer dead-letters its
    change naming the column (Debezium carries such text as it is; a user expects no silent
    change), and `ordo cdc ingest` and `ordo append` refuse the line (`USER_JSON_DECODER`).
    Another spelling of the same number (`1E+2`, `1.50`) is carried.

    Every line of an ingest reads its numbers here, so the common ones are let through on the
    cheapest check that proves them exact (a repr cost more than the float it checks): a text
    shorter than `may_round`'s shapes without an exponent has none of them. Of the others, the
    shortest text equals `text` for most; only those `may_round` cannot clear are compared as
    decimals.
    """
    number = finite_double(text)
    if len(text) < len(_MAY_ROUND[0]) and "e" not in text and "E" not in text:
        return number
    shortest = repr(number)
    if shortest != text and may_round(text) and Decimal(shortest) != Decimal(text):
        msg = f"number {text} is rounded to {shortest} as a double"
        raise NumberOutOfRangeError(msg)
    return number


USER_JSON_DECODER = document_decoder(parse_constant=not_a_json_number, parse_float=exact_double)
"""Standard JSON a user wrote whose numbers are stored as doubles (mutation and event lines),
read with `decode_json`: NaN, infinities and numbers a double cannot hold or would round
(`exact_double`, as captures refuse them) are refused too."""


def decode_json(text: str, decoder: json.JSONDecoder = _DOCUMENT_DECODER) -> Any:
    """`decoder.decode(text)` of JSON a user wrote, failing only with ValueError.

    Duplicate keys and over-long integers are ValueErrors of `document_decoder`. The json
    module reads nesting only as deep as Python's recursion limit: deeper arrays or objects
    raised RecursionError, which no reader caught, so `ordo append`, `ordo cdc ingest` and
    `ordo cdc schemas register` ended in a traceback.
    """
    try:
        return decoder.decode(text)
    except RecursionError as exc:
        msg = f"nested deeper than the {sys.getrecursionlimit():,} levels Python reads"
        raise ValueError(msg) from exc
