"""Tracking tokens: how far a processor's segment has processed its source (inclusive)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from ordo.errors import InvalidInputError, OffsetFormatError
from ordo.processing.segment import Segment
from ordo.time import TimeUUID


@dataclass(frozen=True, slots=True)
class PartAhead:
    """A part of a merged segment that had processed further than the merged token.

    Axon keeps a MergedTrackingToken for the same reason: events of `segment` up to `offset`
    (inclusive) may have been handled before the merge. The merged segment checks its events
    up to there against what was recorded as handled (positions or handled events): one of
    that half that was not visible yet when the half passed its offset is still handled.
    """

    segment: Segment
    offset: TimeUUID


@dataclass(frozen=True, slots=True)
class TrackingToken:
    """The offset of the last event a segment processed (inclusive); None before the first.

    Stored as a small versioned JSON document, so that the format can grow. Tokens order by
    offset (no offset first). When two segments merge, the lower offset is kept and the half
    that was further ahead becomes a part ahead (`ahead`), up to whose offset the merged
    segment checks what was handled already; a part is dropped once the offset passes it.
    """

    offset: TimeUUID | None = None
    ahead: tuple[PartAhead, ...] = ()

    def __post_init__(self) -> None:
        """InvalidInputError for an offset that is not a TimeUUID, or parts that are no parts.

        `TrackingToken("abc")` was accepted, and failed only where the token was stored
        or compared (an AttributeError in `reset_processor`); so was `ahead` of anything but
        a tuple of PartAhead (a list, a text, a part of a segment and a text).
        """
        if self.offset is not None and not isinstance(self.offset, TimeUUID):
            msg = (
                f"a tracking token's offset must be a TimeUUID (TimeUUID.parse(text)) or None, "
                f"got {type(self.offset).__name__}: {self.offset!r:.80}"
            )
            raise InvalidInputError(msg)
        if not isinstance(self.ahead, tuple) or not all(
            isinstance(part, PartAhead)
            and isinstance(part.segment, Segment)
            and isinstance(part.offset, TimeUUID)
            for part in self.ahead
        ):
            msg = (
                "a tracking token's ahead must be a tuple of PartAhead(Segment, TimeUUID), "
                f"got {self.ahead!r:.80}"
            )
            raise InvalidInputError(msg)

    def to_json(self) -> str:
        """The stored form (the `ahead` key only while there are parts ahead)."""
        document: dict[str, object] = {
            "v": 1,
            "offset": None if self.offset is None else str(self.offset),
        }
        if self.ahead:
            document["ahead"] = [
                [part.segment.segment_id, part.segment.mask, str(part.offset)]
                for part in self.ahead
            ]
        return json.dumps(document)

    @classmethod
    def from_json(cls, text: str | None) -> TrackingToken:
        """Read the stored form (None: a segment that never processed anything)."""
        if text is None:
            return cls()
        try:
            document = json.loads(text)
            offset = document["offset"]
            ahead = tuple(
                PartAhead(Segment(int(segment_id), int(mask)), TimeUUID.parse(part_offset))
                for segment_id, mask, part_offset in document.get("ahead", ())
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            msg = f"not a stored tracking token: {text!r}"
            raise OffsetFormatError(msg) from exc
        return cls(None if offset is None else TimeUUID.parse(offset), ahead)

    @property
    def reached(self) -> TimeUUID | None:
        """The furthest offset any part of the token processed: its own or a part's ahead.

        The token's offset is where the segment resumes, but a merged half may have handled
        events up to its part's offset: what was handled at all ends here.
        """
        offsets = [part.offset for part in self.ahead]
        if self.offset is not None:
            offsets.append(self.offset)
        return max(offsets, default=None)

    def is_before(self, other: TrackingToken) -> bool:
        """Whether this token's offset is behind `other`'s (it has less processed)."""
        if self.offset is None:
            return other.offset is not None
        return other.offset is not None and self.offset < other.offset

    def merged(
        self, segment: Segment, other: TrackingToken, other_segment: Segment
    ) -> TrackingToken:
        """The token of the merge of `segment` (with this token) and `other_segment`.

        The lower offset is where the merged segment resumes; the other half, and any parts
        ahead of either, are kept as parts ahead.
        """
        low, high, high_segment = self, other, other_segment
        if other.is_before(self):
            low, high, high_segment = other, self, segment
        parts = (*low.ahead, *high.ahead)
        if high.offset is not None:
            parts = (*parts, PartAhead(high_segment, high.offset))
        return TrackingToken(low.offset, parts).advanced_to(low.offset)

    def advanced_to(self, offset: TimeUUID | None) -> TrackingToken:
        """The token moved on to `offset`, without the parts ahead that it has reached."""
        if offset is None:
            return TrackingToken(None, self.ahead)
        return TrackingToken(offset, tuple(p for p in self.ahead if offset < p.offset))

    def __str__(self) -> str:
        position = "start" if self.offset is None else str(self.offset)
        if not self.ahead:
            return position
        return f"{position} (+{len(self.ahead)} merged part(s) ahead)"
