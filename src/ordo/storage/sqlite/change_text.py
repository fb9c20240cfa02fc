"""Change rows holding text that is not UTF-8, which SQLite stores and Python's driver cannot read.

SQLite keeps the bytes an application binds or casts as text (`CAST(x'ff' AS TEXT)`, a driver
handed Latin-1) without checking them, and its JSON functions copy them into the change table
as they are. Python's sqlite3 refuses to read such a row, so the capture window (or snapshot)
holding it failed, and every later one with it: the capture stopped for good. Such a value is
set aside as the triggers set aside a BLOB (`ordo.cdc.schema.not_json_cell`): under a name no
schema has, as `not_utf8_text` of its bytes, so the materializer dead-letters the change naming
the column; in a key it is null, which the materializer dead-letters too. Rows are read as they
are first, so a window without such text costs nothing more.
"""

from __future__ import annotations

import functools
import json
import re
import sqlite3
from collections.abc import Sequence
from typing import Any

from ordo.cdc.json_text import parse_json, strict_json
from ordo.cdc.mutation import JsonValue
from ordo.cdc.schema import is_not_json_cell, not_json_cell, not_utf8_text

_ESCAPING = functools.partial(str, encoding="utf-8", errors="surrogateescape")
"""Reads text as UTF-8, each byte that is not UTF-8 as a lone surrogate (U+DC80-U+DCFF)."""
_ESCAPED = re.compile("[\udc80-\udcff]")
_UNICODE_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def fetch_change_rows(
    conn: sqlite3.Connection, sql: str, parameters: Sequence[object] = ()
) -> list[tuple[Any, ...]]:
    """The rows of `sql`, whose texts are JSON texts the triggers wrote (or names and codes).

    When the driver cannot read them (OperationalError: text that is not UTF-8), they are read
    again with such bytes escaped, and each JSON text holding one is rewritten (`_carried`);
    another error recurs on the second read, and is raised.
    """
    try:
        return conn.execute(sql, parameters).fetchall()
    except sqlite3.OperationalError:
        pass  # read again below
    conn.text_factory = _ESCAPING
    try:
        rows = conn.execute(sql, parameters).fetchall()
    finally:
        conn.text_factory = str
    return [tuple(_carried(value) for value in row) for row in rows]


def _carried(value: object) -> object:
    """`value`, or the JSON text it is with each value holding bytes that are not UTF-8 aside.

    A key (a JSON array) gets null for such a value, a row (a JSON object) the value as
    `not_utf8_text` under `not_json_cell` of its column (a value set aside already keeps its
    name).
    """
    if not isinstance(value, str) or not _ESCAPED.search(value):
        return value
    document = parse_json(value)
    if isinstance(document, list):
        return strict_json([None if _is_escaped(v) else v for v in document])
    row: dict[str, JsonValue] = {}
    for name, cell in document.items():
        if _is_escaped(cell):
            row[name if is_not_json_cell(name) else not_json_cell(name)] = _aside(cell)
        else:
            row[name] = cell
    return strict_json(row)


def _is_escaped(value: JsonValue) -> bool:
    """Whether `value` (a JSON column's document too) holds bytes that are not UTF-8."""
    text = value if isinstance(value, str) else _UNICODE_JSON(value)
    return _ESCAPED.search(text) is not None


def _aside(value: JsonValue) -> str:
    """`not_utf8_text` of the bytes SQLite holds (a JSON column's document as compact JSON)."""
    text = value if isinstance(value, str) else _UNICODE_JSON(value)
    return not_utf8_text(text.encode("utf-8", "surrogateescape"))
