"""The journal's contract, run once per backend through `journal_url`: `delete_to`, which
keeps the numbering and the tag views, buffered ones included.
"""

from __future__ import annotations

from journal_support import BATCHED, IMMEDIATE, JournalFactory, events_of, payloads, still_clock
from ordo import Journal, NewEvent
from ordo.storage.stores import Stores
from ordo.types import Tag


def test_delete_to_removes_events_but_keeps_numbering_and_tag_views(
    journal: Journal, stores: Stores
) -> None:
    journal.append("p", [NewEvent.of(n, tags=["t"]) for n in range(1, 6)])
    journal.append("other", [NewEvent.of("o", tags=["t"])])

    assert journal.delete_to("p", 3) == 3

    assert payloads(journal, "p") == [4, 5]
    assert payloads(journal, "p", from_sequence_nr=1, to_sequence_nr=3) == []
    assert journal.highest_sequence_nr("p") == 5
    assert list(journal.persistence_ids()) == ["other", "p"]
    assert payloads(journal, "other") == ["o"]
    receipt = journal.append("p", [NewEvent.of(6, tags=["t"])])
    assert receipt.first_sequence_nr == 6
    assert events_of(journal, "p")[-1].tags == {"t": 6}
    entries = [e for e in stores.tag_views.tag_view_entries(Tag("t")) if e.persistence_id == "p"]
    assert sorted((e.sequence_nr, e.tag_pid_sequence_nr) for e in entries) == [
        (n, n) for n in range(1, 7)
    ]


def test_delete_to_past_the_end_deletes_all_and_numbering_goes_on(
    journal_factory: JournalFactory,
) -> None:
    journal = journal_factory(settings=IMMEDIATE)
    journal.append("p", [NewEvent.of(1, tags=["t"]), NewEvent.of(2, tags=["t"])])

    assert journal.delete_to("p", 100) == 2
    assert journal.delete_to("p", 100) == 0

    assert payloads(journal, "p") == []
    assert journal.highest_sequence_nr("p") == 2
    assert journal.append("p", [NewEvent.of(3)]).first_sequence_nr == 3
    # Another journal (a restart) learns the numbering from the database, deleted events too.
    restarted = journal_factory(settings=IMMEDIATE)
    assert restarted.highest_sequence_nr("p") == 3
    assert restarted.append("p", [NewEvent.of(4, tags=["t"])]).first_sequence_nr == 4
    assert events_of(restarted, "p")[-1].tags == {"t": 3}


def test_delete_to_writes_buffered_tag_views_first(
    journal_factory: JournalFactory, stores: Stores
) -> None:
    journal = journal_factory(settings=BATCHED, clock=still_clock())
    journal.append("p", [NewEvent.of(1, tags=["t"]), NewEvent.of(2, tags=["t"])])
    assert list(stores.tag_views.tag_view_entries(Tag("t"))) == []

    journal.delete_to("p", 2)

    entries = list(stores.tag_views.tag_view_entries(Tag("t")))
    assert [(e.sequence_nr, e.tag_pid_sequence_nr) for e in entries] == [(1, 1), (2, 2)]


def test_delete_to_by_another_journal_keeps_buffered_events_tag_views(
    journal_factory: JournalFactory, stores: Stores
) -> None:
    """A cleanup in another process must not lose what the writer has not written yet."""
    writer = journal_factory(settings=BATCHED, clock=still_clock())
    cleaner = journal_factory(settings=BATCHED, clock=still_clock())
    writer.append("p", [NewEvent.of(1, tags=["t"]), NewEvent.of(2, tags=["t"])])

    cleaner.delete_to("p", 2)
    writer.flush()

    entries = list(stores.tag_views.tag_view_entries(Tag("t")))
    assert [(e.sequence_nr, e.tag_pid_sequence_nr) for e in entries] == [(1, 1), (2, 2)]


def test_delete_to_of_an_unknown_id_deletes_nothing(journal: Journal) -> None:
    assert journal.delete_to("nobody", 5) == 0
    assert journal.highest_sequence_nr("nobody") == 0
