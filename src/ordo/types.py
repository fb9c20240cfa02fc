"""Identifier types, so that one kind of number cannot be passed where another is expected."""

from __future__ import annotations

from typing import NewType

PersistenceId = NewType("PersistenceId", str)
Tag = NewType("Tag", str)
SequenceNr = NewType("SequenceNr", int)
"""Position of an event in its persistence id's journal, starting at 1."""
TagPidSequenceNr = NewType("TagPidSequenceNr", int)
"""Position of an event among the events of one (persistence id, tag), starting at 1."""
TimeBucket = NewType("TimeBucket", int)
"""Epoch milliseconds of the start of a time bucket."""
