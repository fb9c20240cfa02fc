"""How a change log file's name carries its segment and position range.

`<segment>-<lowest>-<highest>.parquet`, or `<segment>-unpositioned-<uuid>.parquet` for mutations
without a position. The change log writes these names and reads them back to learn, without
opening a file, what each segment has published: the segment part is a token that is never
empty or hidden from Spark's listing, and that maps back to exactly one segment. A table's name
names its folder, so it must be one plain folder name (`checked_table_name`).
"""

from __future__ import annotations

import re
import string

from ordo.errors import InvalidInputError
from ordo.journal.validation import check_storable

FILE_NAME = re.compile(r"^(?P<segment>.+)-(?P<lowest>\d+)-(?P<highest>\d+)\.parquet$")
"""A positioned file's name: its segment token and the lowest and highest position it holds."""
_UNPOSITIONED = re.compile(r"^(?P<segment>.+)-unpositioned-[0-9a-f]{32}\.parquet$")
"""A file of mutations without a position: its segment token and a uuid."""
_KEPT = frozenset(string.ascii_letters + string.digits + "_.")
_HIDING = ("_", ".")
"""Spark's and Hadoop's file listings skip names starting with these: a file so named is lost."""
_EMPTY_SEGMENT = "-"
_ESCAPED = re.compile(r"(?:-[0-9a-f]{2})+")


def segment_token(segment: str) -> str:
    """The segment as a file name part: never empty or hidden, and one per segment.

    Letters, digits, `_` and `.` stand for themselves (so slot names read as they are), except a
    leading `_` or `.`; every other character is its UTF-8 bytes as `-xx`. Two segments never
    share a token (the file names' positions would mix), and `segment_name` reverses it.
    """
    return (
        "".join(
            char
            if char in _KEPT and not (index == 0 and char in _HIDING)
            else "".join(f"-{byte:02x}" for byte in char.encode("utf-8", "surrogatepass"))
            for index, char in enumerate(segment)
        )
        or _EMPTY_SEGMENT
    )


LONGEST_TOKEN = 255 - len(f".-unpositioned-{'0' * 32}.parquet.{'0' * 32}.tmp")
"""The longest segment token a file name holds: file systems name files in at most 255 bytes,
and the longest name is the hidden part of a file of mutations without a position."""


def checked_segment_token(segment: str) -> str:
    """`segment_token(segment)`; InvalidInputError when it is too long to name a file.

    The file system refused such a name only while a publish wrote its files, so a command
    that checks every input before it publishes any (`cdc ingest`) had published those before.
    """
    token = segment_token(segment)
    if len(token) > LONGEST_TOKEN:
        msg = (
            f"segment {segment[:60]!r}... is too long to name a change log file: "
            f"{len(token)} characters as a file name part, at most {LONGEST_TOKEN} (characters "
            "other than letters, digits, `_` and `.` take 3 each)"
        )
        raise InvalidInputError(msg)
    return token


def token_of(name: str) -> str | None:
    """The segment token of a change log file's `name`, positioned or not; None for another name.

    A token holds `-` only before two hex digits, so neither ending can be read into it.
    """
    match = FILE_NAME.match(name) or _UNPOSITIONED.match(name)
    return None if match is None else match["segment"]


def segment_name(token: str) -> str:
    """The segment a file name's token stands for (the inverse of `segment_token`)."""
    if token == _EMPTY_SEGMENT:
        return ""
    return _ESCAPED.sub(
        lambda run: bytes.fromhex(run[0].replace("-", "")).decode("utf-8", "replace"), token
    )


def checked_table_name(table: str) -> str:
    """`table` when it can name a change log directory; InvalidInputError otherwise.

    A table name is one directory under the log's root: "..", a separator or an absolute path
    would put a table's changes anywhere on the disk. It must be UTF-8 text too: a lone
    surrogate (which a command line holding bytes that are not UTF-8 decodes to) was a raw
    UnicodeEncodeError from the file system.
    """
    if not isinstance(table, str) or table in {"", ".", ".."} or any(c in table for c in "/\\\0"):
        msg = f"table name {table!r} cannot name a change log directory (one plain name is needed)"
        raise InvalidInputError(msg)
    check_storable("table name", table, InvalidInputError)
    return table
