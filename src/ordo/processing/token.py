"""Tracking tokens: how far a processor's segment has processed its source (inclusive)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from ordo.errors import OffsetFormatError
from ordo.time import TimeUUID


@dataclass(frozen=True, slots=True)
class TrackingToken:
    """The offset of the last event a segment processed (inclusive); None before the first.

    Stored as a small versioned JSON document, so that the format can grow. Tokens order by
    offset (no offset first): when two segments merge, the lower token is kept.
    """

    offset: TimeUUID | None = None

    def to_json(self) -> str:
        """The stored form."""
        return json.dumps({"v": 1, "offset": None if self.offset is None else str(self.offset)})

    @classmethod
    def from_json(cls, text: str | None) -> TrackingToken:
        """Read the stored form (None: a segment that never processed anything)."""
        if text is None:
            return cls()
        try:
            document = json.loads(text)
            offset = document["offset"]
        except (ValueError, KeyError, TypeError) as exc:
            msg = f"not a stored tracking token: {text!r}"
            raise OffsetFormatError(msg) from exc
        return cls(None if offset is None else TimeUUID.parse(offset))

    def is_before(self, other: TrackingToken) -> bool:
        """Whether this token is behind `other` (a segment with it has less processed)."""
        if self.offset is None:
            return other.offset is not None
        return other.offset is not None and self.offset < other.offset

    def __str__(self) -> str:
        return "start" if self.offset is None else str(self.offset)
