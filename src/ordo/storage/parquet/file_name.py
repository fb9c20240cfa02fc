"""How a change log file's name carries its segment and position range.

`<segment>-<lowest>-<highest>.parquet`, or `<segment>-unpositioned-<uuid>.parquet` for mutations
without a position. The change log writes these names and reads them back to learn, without
opening a file, what each segment has published: the segment part is a token that is never
empty or hidden from Spark's listing, and that maps back to exactly one segment.
"""

from __future__ import annotations

import re
import string

FILE_NAME = re.compile(r"^(?P<segment>.+)-(?P<lowest>\d+)-(?P<highest>\d+)\.parquet$")
"""A positioned file's name: its segment token and the lowest and highest position it holds."""
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


def segment_name(token: str) -> str:
    """The segment a file name's token stands for (the inverse of `segment_token`)."""
    if token == _EMPTY_SEGMENT:
        return ""
    return _ESCAPED.sub(
        lambda run: bytes.fromhex(run[0].replace("-", "")).decode("utf-8", "replace"), token
    )
