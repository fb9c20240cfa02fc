"""The tag writer: tagged events into time-bucketed tag views, with crash-safe progress."""

from __future__ import annotations

from ordo.tagging.ports import (
    TaggedEvent,
    TagProgress,
    TagSummary,
    TagViewStore,
    TagViewWriter,
    TagWrite,
)
from ordo.tagging.tag_writer import TagWriter, TagWriters

__all__ = [
    "TagProgress",
    "TagSummary",
    "TagViewStore",
    "TagViewWriter",
    "TagWrite",
    "TagWriter",
    "TagWriters",
    "TaggedEvent",
]
