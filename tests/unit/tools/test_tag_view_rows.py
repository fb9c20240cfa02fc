"""The pure core of rebuilds: numbers and buckets from the events alone."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ordo.journal import PersistedEvent
from ordo.time import BucketSize, TimeUUID
from ordo.tools.ports import ExpiryHorizons
from ordo.tools.tag_view_rows import rebuild_tag_views
from ordo.types import PersistenceId, SequenceNr, Tag, TagPidSequenceNr

START_MS = 1_767_225_600_000


def _events(tag_sets: list[frozenset[str]], *, first: int = 1) -> list[PersistedEvent]:
    """Events numbered as the journal numbers them, 40 s apart (minute buckets change)."""
    counters: dict[str, int] = {}
    events = []
    for offset, tags in enumerate(tag_sets):
        numbers = {}
        for tag in sorted(tags):
            counters[tag] = counters.get(tag, first - 1) + 1
            numbers[Tag(tag)] = TagPidSequenceNr(counters[tag])
        events.append(
            PersistedEvent(
                persistence_id=PersistenceId("p"),
                sequence_nr=SequenceNr(first + offset),
                timeuuid=TimeUUID.min_for_epoch_ns((START_MS + 40_000 * offset) * 1_000_000),
                writer_uuid="w",
                serializer="json",
                manifest="",
                payload_bytes=b"{}",
                metadata_json=None,
                tags=numbers,
            )
        )
    return events


_HORIZONS = st.none() | st.integers(0, 31).map(lambda k: START_MS + 40_000 * k)
"""No horizon, or the instant of one of the events (or after the last)."""


@given(
    st.lists(st.frozensets(st.sampled_from("abc")), max_size=30),
    st.integers(1, 5),
    _HORIZONS,
    _HORIZONS,
)
def test_a_rebuild_gives_the_numbers_the_journal_assigned(
    tag_sets: list[frozenset[str]], first: int, every_tag: int | None, tag_a: int | None
) -> None:
    """Expired events (before every tag's horizon, or tag `a`'s own) get no row, but count."""
    events = _events(tag_sets, first=first)
    per_tag = {} if tag_a is None else {Tag("a"): tag_a}
    horizons = ExpiryHorizons(every_tag_ms=every_tag, per_tag_ms=per_tag)
    built = rebuild_tag_views(events, BucketSize.MINUTE, horizons=horizons)
    expected = {
        (tag, event.sequence_nr, nr, BucketSize.MINUTE.key(event.timeuuid.epoch_ms))
        for event in events
        for tag, nr in event.tags.items()
        if all(event.timeuuid.epoch_ms >= h for h in (every_tag, per_tag.get(tag)) if h is not None)
    }
    assert {
        (r.tag, r.sequence_nr, r.tag_pid_sequence_nr, r.time_bucket) for r in built.all_rows()
    } == expected
    for tag, progress in built.progress.items():
        last = [e for e in events if tag in e.tags][-1]
        assert (progress.sequence_nr, progress.timeuuid) == (last.sequence_nr, last.timeuuid)


def test_only_the_tags_asked_for_are_built() -> None:
    built = rebuild_tag_views(
        _events([frozenset("ab"), frozenset("b")]),
        BucketSize.HOUR,
        tags=[Tag("b")],
        horizons=ExpiryHorizons(),
    )
    assert list(built.rows) == ["b"]
    assert [r.tag_pid_sequence_nr for r in built.rows[Tag("b")]] == [1, 2]
    assert built.highest == 2
