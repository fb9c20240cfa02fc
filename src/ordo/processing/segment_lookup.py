"""A processor's segments looked up by id, as the operator actions on them find them.

Apart from `ordo.processing.control` so that the processor and the actions share the look-ups.
"""

from __future__ import annotations

from ordo.errors import InvalidSegmentOperationError, UnknownSegmentError
from ordo.journal import validation
from ordo.processing.ports import TokenEntry, TokenStore


def segment_entry(tokens: TokenStore, processor: str, segment_id: int) -> TokenEntry:
    """The segment's entry, UnknownSegmentError without one (as the token store's requests).

    A segment_id that is not an int is refused, not looked for.
    """
    validation.integer(segment_id, name="segment_id")
    for entry in tokens.entries(processor):
        if entry.segment.segment_id == segment_id:
            return entry
    msg = f"processor {processor!r} has no segment {segment_id}"
    raise UnknownSegmentError(msg)


def merged_pair(
    tokens: TokenStore, processor: str, segment_id: int
) -> tuple[TokenEntry, TokenEntry]:
    """The segment and its sibling, the two that merge_segment merges.

    Raises:
        UnknownSegmentError: either is not there.
        InvalidSegmentOperationError: the root, or a sibling split further.

    """
    entry = segment_entry(tokens, processor, segment_id)
    if entry.segment.is_root:
        msg = f"processor {processor!r}: the root segment has nothing to merge with"
        raise InvalidSegmentOperationError(msg)
    sibling = segment_entry(tokens, processor, entry.segment.mergeable_segment_id())
    if not entry.segment.is_mergeable_with(sibling.segment):
        msg = f"cannot merge {entry.segment} with {sibling.segment}: they are not siblings"
        raise InvalidSegmentOperationError(msg)
    return entry, sibling
