"""JSON columns' documents holding a number a double would round, set aside in a change row.

SQLite's JSON functions keep a number's digits, so the triggers copy `0.10000000000000000001`
into the change row as written, and the change log held it so: the materializer read it as the
double 0.1 (`1e-400` as 0.0), and messages and sinks held a value the application never wrote.
SQL cannot tell whether a number's text is a double's, so the capture looks in Python, and sets
such a document aside as the triggers set aside one beyond a double's range: under
`ordo.cdc.schema.not_json_cell` of its column, as its text, so the materializer dead-letters
the change naming the column (`parse_application_json` says why).

Only a row that `ordo.documents.may_round` (the rule `exact_double` applies to each number)
cannot clear is read member by member; any other row costs a translation of its bytes and
three substring searches instead of a parse, a row of a table without JSON columns nothing.
"""

from __future__ import annotations

import json
from collections.abc import Collection

from ordo.cdc.json_text import compact_json, parse_application_json
from ordo.cdc.schema import not_json_cell
from ordo.documents import NumberOutOfRangeError, may_round

_SPANS = json.JSONDecoder(parse_int=len, parse_float=len)
"""Reads a member's name and finds where its value ends (`raw_decode`); the value is read
again if it is a JSON column's. Its numbers are not converted (their length stands in): an
integer longer than Python converts (4300 digits) stopped the capture at every poll, where
`parse_application_json` sets it aside."""


def set_aside_rounded(row_json: str, json_columns: Collection[str]) -> str:
    """`row_json` (json_object() text), or with each JSON column a double would round aside.

    `json_columns` are the table's JSON columns. A document that is a bare number is the REAL
    SQLite stored (a JSON column has NUMERIC affinity: it rounded the text itself, and the
    application reads that double back), carried as the double it is; others are checked.
    """
    if not json_columns or not may_round(row_json):
        return row_json
    members: list[str] = []
    start = 1  # the first name's quote: json_object() writes no white space
    while start < len(row_json) - 1:
        name, colon = _SPANS.raw_decode(row_json, start)
        end = _SPANS.raw_decode(row_json, colon + 1)[1]
        value = row_json[colon + 1 : end]
        if name in json_columns and value[:1] in ("[", "{") and _rounds(value):
            members.append(f"{compact_json(not_json_cell(name))}:{compact_json(value)}")
        else:
            members.append(row_json[start:end])
        start = end + 1  # past the "," (or the closing "}")
    return "{" + ",".join(members) + "}"


def _rounds(document: str) -> bool:
    """Whether the JSON `document` holds a number a double would round (or cannot hold)."""
    try:
        parse_application_json(document)
    except NumberOutOfRangeError:
        return True
    return False
