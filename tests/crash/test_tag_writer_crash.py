"""G7: a writer killed at any of seed 000's three points leaves tag views that recovery completes.

A child process (crashing_writer.py) appends tagged events and SIGKILLs itself: with events only
buffered in the tag writer, between the tag_views write and the progress write, or after both.
Recovery must then write every tagged journal event to the tag views exactly once, with the tag
pid sequence nrs stored in the journal, contiguous per (persistence id, tag), and leave the
progress at the last one. Runs once per backend.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from kill_support import run_until_killed
from ordo import BucketSize, EventsByTagSettings, Journal, NewEvent
from ordo.storage.stores import Stores
from ordo.time import TimeUUID

pytestmark = pytest.mark.slow

JournalFactory = Callable[..., Journal]
Row = tuple[str, int, TimeUUID, str, int, int]
"""A tag_views row: tag, time bucket, timeuuid, persistence id, sequence nr, tag pid sequence nr."""
Rows = Counter[Row]

WRITER = Path(__file__).with_name("crashing_writer.py")
SETTINGS = EventsByTagSettings(flush_interval=timedelta(hours=1), max_message_batch_size=10_000)
BUCKET_SIZE = BucketSize.HOUR  # crashing_writer.py's, the default


def crash_writer(url: str, scenario: str) -> None:
    """Run the writer until it kills itself; fail if it died any other way."""
    assert run_until_killed(WRITER, url, scenario) == ["appended"]


def journal_rows(journal: Journal) -> Rows:
    """The tag_views rows the journal's events call for (with the numbers stored in them)."""
    rows: Rows = Counter()
    for pid in journal.persistence_ids():
        for event in journal.replay(pid):
            for tag, number in event.tags.items():
                bucket = BUCKET_SIZE.key(event.timeuuid.epoch_ms)
                rows[(tag, bucket, event.timeuuid, pid, event.sequence_nr, number)] += 1
    return rows


def view_rows(stores: Stores) -> Rows:
    return Counter(
        (e.tag, e.time_bucket, e.timeuuid, e.persistence_id, e.sequence_nr, e.tag_pid_sequence_nr)
        for summary in stores.tag_views.tags()
        for e in stores.tag_views.tag_view_entries(summary.tag)
    )


def progress_of(
    journal: Journal, stores: Stores
) -> dict[tuple[str, str], tuple[int, int, TimeUUID]]:
    return {
        (pid, tag): (p.sequence_nr, p.tag_pid_sequence_nr, p.timeuuid)
        for pid in journal.persistence_ids()
        for tag, p in stores.tag_views.read_progress(pid).items()
    }


def assert_tag_views_complete(journal: Journal, stores: Stores) -> None:
    """Every tagged event exactly once, numbered 1..n per (pid, tag), progress at the last."""
    expected = journal_rows(journal)
    assert view_rows(stores) == expected
    last: dict[tuple[str, str], tuple[int, int, TimeUUID]] = {}
    numbers: dict[tuple[str, str], list[int]] = {}
    for tag, _, timeuuid, pid, seq, number in sorted(expected, key=lambda row: row[4]):
        numbers.setdefault((pid, tag), []).append(number)
        last[(pid, tag)] = (seq, number, timeuuid)
    for found in numbers.values():
        assert found == list(range(1, len(found) + 1))
    assert progress_of(journal, stores) == last


def assert_crashed_as_the_scenario_says(journal: Journal, stores: Stores, scenario: str) -> None:
    """Guard the test itself: the kill really left the state the scenario names."""
    expected, found = journal_rows(journal), view_rows(stores)
    assert found - expected == Counter(), "tag views hold rows no event calls for"
    if scenario == "after_flush":
        assert found == expected
        return
    assert found != expected, "the kill lost no tag_views row"
    if scenario == "before_progress":
        progress = progress_of(journal, stores)
        assert any(
            number > progress.get((pid, tag), (0, 0))[1] for tag, _, _, pid, _, number in found
        ), "no row was written without its progress"


@pytest.mark.parametrize("scenario", ["buffered", "before_progress", "after_flush"])
def test_recover_completes_the_tag_views(
    journal_url: str, journal_factory: JournalFactory, stores: Stores, scenario: str
) -> None:
    crash_writer(journal_url, scenario)
    journal = journal_factory(settings=SETTINGS)
    assert_crashed_as_the_scenario_says(journal, stores, scenario)
    pids = list(journal.persistence_ids())
    highest = {pid: journal.highest_sequence_nr(pid) for pid in pids}

    assert {pid: journal.recover(pid) for pid in pids} == highest
    journal.flush()

    assert_tag_views_complete(journal, stores)
    after_first = (view_rows(stores), progress_of(journal, stores))
    # Recovering again, in this journal or after another restart, changes nothing.
    for pid in pids:
        journal.recover(pid)
    journal.flush()
    restarted = journal_factory(settings=SETTINGS)
    for pid in pids:
        restarted.recover(pid)
    restarted.flush()
    assert (view_rows(stores), progress_of(journal, stores)) == after_first


@pytest.mark.parametrize("scenario", ["buffered", "before_progress", "after_flush"])
def test_the_next_append_recovers_implicitly(
    journal_url: str, journal_factory: JournalFactory, stores: Stores, scenario: str
) -> None:
    crash_writer(journal_url, scenario)
    journal = journal_factory(settings=SETTINGS)
    before = journal_rows(journal)
    pids = list(journal.persistence_ids())

    for pid in pids:
        journal.append(pid, [NewEvent.of("after the crash", tags=["red", "after"])])
    journal.flush()

    assert_tag_views_complete(journal, stores)
    assert before - journal_rows(journal) == Counter()
    for pid in pids:
        last = list(journal.replay(pid))[-1]
        reds = [e for e in journal.replay(pid) if "red" in e.tags]
        assert last.tags == {"red": len(reds), "after": 1}


@pytest.mark.parametrize("scenario", ["buffered", "before_progress"])
def test_delete_to_after_a_kill_keeps_the_deleted_events_tag_views(
    journal_url: str, journal_factory: JournalFactory, stores: Stores, scenario: str
) -> None:
    """Tag views keep deleted events (seed 001): delete_to must not lose the unwritten ones.

    Nor may a later append number its tags as if they had never been.
    """
    crash_writer(journal_url, scenario)
    journal = journal_factory(settings=SETTINGS)
    before = journal_rows(journal)
    pids: list[str] = list(journal.persistence_ids())

    for pid in pids:
        journal.delete_to(pid, journal.highest_sequence_nr(pid))
    for pid in pids:
        journal.append(pid, [NewEvent.of("after the delete", tags=["red"])])
    journal.flush()

    numbers: dict[tuple[str, str], list[int]] = {}
    for tag, _, _, pid, _, number in view_rows(stores).elements():
        numbers.setdefault((pid, tag), []).append(number)
    duplicated = {key: found for key, found in numbers.items() if len(found) != len(set(found))}
    assert duplicated == {}, "tag pid sequence nrs given twice"
    assert before - view_rows(stores) == Counter(), "tag_views rows of deleted events lost"
    for found in numbers.values():
        assert sorted(found) == list(range(1, len(found) + 1))
