"""The journal's contract, run once per backend through `journal_url`: optimistic
concurrency, also between two journals on one database; a conflict changes nothing.
"""

from __future__ import annotations

import pytest

from journal_support import IMMEDIATE, JournalFactory, events_of, payloads, snapshot
from ordo import ConcurrencyConflictError, Journal, NewEvent
from ordo.storage.stores import Stores


def test_expected_sequence_nr_that_matches_is_accepted(journal: Journal) -> None:
    journal.append("p", [NewEvent.of(1)], expected_sequence_nr=0)
    receipt = journal.append("p", [NewEvent.of(2), NewEvent.of(3)], expected_sequence_nr=1)

    assert (receipt.first_sequence_nr, receipt.last_sequence_nr) == (2, 3)


@pytest.mark.parametrize("expected", [0, 1, 3, 10])
def test_expected_sequence_nr_conflict_changes_nothing(
    journal: Journal, stores: Stores, expected: int
) -> None:
    journal.append("p", [NewEvent.of(1, tags=["t"]), NewEvent.of(2, tags=["t"])])
    before = snapshot(journal, stores)

    with pytest.raises(ConcurrencyConflictError) as raised:
        journal.append("p", [NewEvent.of("late", tags=["t"])], expected_sequence_nr=expected)

    assert (raised.value.persistence_id, raised.value.expected, raised.value.actual) == (
        "p",
        expected,
        2,
    )
    assert snapshot(journal, stores) == before
    receipt = journal.append("p", [NewEvent.of(3, tags=["t"])], expected_sequence_nr=2)
    assert receipt.first_sequence_nr == 3
    assert events_of(journal, "p")[-1].tags == {"t": 3}


def test_a_second_journal_sees_the_first_ones_events(journal_factory: JournalFactory) -> None:
    first = journal_factory(settings=IMMEDIATE)
    second = journal_factory(settings=IMMEDIATE)
    first.append("p", [NewEvent.of(1, tags=["t"]), NewEvent.of(2, tags=["t"])])

    receipt = second.append("p", [NewEvent.of(3, tags=["t"])])

    assert receipt.first_sequence_nr == 3
    assert payloads(second, "p") == [1, 2, 3]
    assert events_of(second, "p")[-1].tags == {"t": 3}

    # The first journal's idea of "p" is stale: an explicit expectation from it conflicts ...
    with pytest.raises(ConcurrencyConflictError) as raised:
        first.append("p", [NewEvent.of("stale")], expected_sequence_nr=2)
    assert (raised.value.expected, raised.value.actual) == (2, 3)
    assert not raised.value.is_implicit
    # ... and once the writer knows the truth, it appends after the other journal's event.
    receipt = first.append("p", [NewEvent.of(4, tags=["t"])], expected_sequence_nr=3)
    assert receipt.first_sequence_nr == 4

    # Now the second journal is the stale one: its first default append is stopped, the retry
    # (after it recovered "p") appends after everything.
    with pytest.raises(ConcurrencyConflictError) as raised:
        second.append("p", [NewEvent.of("stale")])
    assert (raised.value.expected, raised.value.actual) == (3, 4)
    assert raised.value.is_implicit
    assert "another writer appended since this journal did" in str(raised.value)
    receipt = second.append("p", [NewEvent.of(5, tags=["t"])])
    assert receipt.first_sequence_nr == 5

    assert payloads(first, "p") == [1, 2, 3, 4, 5]
    assert [e.tags for e in first.replay("p")] == [{"t": n} for n in range(1, 6)]


@pytest.mark.parametrize("deleted", [False, True])
def test_expected_zero_for_an_id_only_another_journal_wrote_conflicts_and_changes_nothing(
    journal_factory: JournalFactory, stores: Stores, deleted: bool
) -> None:
    """An id a journal has not seen, appended with expected 0, is written as new without a read.

    The write itself must find out that another journal wrote the id (or wrote and deleted
    its events: numbers are never reused), and change nothing.
    """
    first = journal_factory(settings=IMMEDIATE)
    second = journal_factory(settings=IMMEDIATE)
    first.append("p", [NewEvent.of(1, tags=["t"]), NewEvent.of(2, tags=["t"])])
    if deleted:
        first.delete_to("p", 2)
    before = snapshot(second, stores)

    with pytest.raises(ConcurrencyConflictError) as raised:
        second.append("p", [NewEvent.of("new?", tags=["t"])], expected_sequence_nr=0)

    assert (raised.value.expected, raised.value.actual) == (0, 2)
    assert snapshot(second, stores) == before
    receipt = second.append("p", [NewEvent.of(3, tags=["t"])], expected_sequence_nr=2)
    assert receipt.first_sequence_nr == 3
    assert events_of(second, "p")[-1].tags == {"t": 3}
    second.append("q", [NewEvent.of(1, tags=["t"])], expected_sequence_nr=0)
    assert [e.tags for e in second.replay("q")] == [{"t": 1}]
