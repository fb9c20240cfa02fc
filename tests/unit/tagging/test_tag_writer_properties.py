"""Properties of the tag writer: every write stored once, in order, and progress never ahead."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from hypothesis import given
from hypothesis import strategies as st

from ordo.tagging import TagProgress, TagWrite, TagWriter
from ordo.time import TimeUUID
from ordo.types import PersistenceId, SequenceNr, Tag, TagPidSequenceNr, TimeBucket

HOUR_MS = 3_600_000


class CheckingTagViews:
    """Stores writes and checks, at every progress write, that the rows are already there."""

    BACKGROUND_WRITES: ClassVar[bool] = False  # a lone TagWriter has no flusher thread

    def __init__(self) -> None:
        self.stored: list[TagWrite] = []

    def write_tag_views(self, writes: Sequence[TagWrite]) -> None:
        self.stored.extend(writes)

    def write_progress(self, progress: Sequence[TagProgress]) -> None:
        for p in progress:
            written = {
                n
                for w in self.stored
                if w.persistence_id == p.persistence_id
                for n in range(w.from_sequence_nr, w.to_sequence_nr + 1)
            }
            assert set(range(1, p.sequence_nr + 1)) <= written, "progress ahead of the rows"


# Each step: (persistence id, number of events, hours the clock moved, flush after it?).
steps = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c"]),
        st.integers(min_value=1, max_value=4),
        st.integers(min_value=0, max_value=1),
        st.booleans(),
    ),
    max_size=30,
)


@given(steps=steps, batch_size=st.integers(min_value=1, max_value=6))
def test_writes_are_stored_once_in_order_with_progress_behind_them(
    steps: list[tuple[str, int, int, bool]], batch_size: int
) -> None:
    store = CheckingTagViews()
    writer = TagWriter(Tag("t"), store, max_message_batch_size=batch_size)
    highest: dict[str, int] = {}
    hour = 0
    added: list[TagWrite] = []
    for pid, events, hours, flush in steps:
        hour += hours
        first = highest.get(pid, 0) + 1
        highest[pid] = last = first + events - 1
        write = TagWrite(
            tag=Tag("t"),
            time_bucket=TimeBucket(hour * HOUR_MS),
            persistence_id=PersistenceId(pid),
            from_sequence_nr=SequenceNr(first),
            to_sequence_nr=SequenceNr(last),
            events=events,
            last_tag_pid_sequence_nr=TagPidSequenceNr(last),
            last_timeuuid=TimeUUID.min_for_epoch_ns((hour * HOUR_MS + len(added)) * 10**6),
        )
        added.append(write)
        writer.add([write])
        if flush:
            writer.flush()
        assert writer.buffered == sum(w.events for w in added[len(store.stored) :])
    writer.flush()

    assert store.stored == added
    assert writer.buffered == 0
