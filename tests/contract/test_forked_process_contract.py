"""A Journal, stores or a query used in a child made by os.fork (multiprocessing's default on
Linux), on both backends: ForkedProcessError before anything is read or written, and close()
in the child leaves the parent's connections alone. The child used its parent's connections
(SQLite forbids it; a PostgreSQL session served two processes) and its Journal's copy issued the
parent's offsets, so that two events of a tag could share one and a reader skip one of them.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fork_support import ChildOutcome, assert_refused, in_forked_child
from journal_support import BATCHED, JournalFactory, payloads
from ordo import NewEvent
from ordo.processing.processor import TrackingProcessor
from ordo.storage.open import events_by_tag_at, stores_at
from ordo.storage.stores import Stores
from ordo.types import PersistenceId
from processing_support import FAST, source

CALLS: dict[str, Callable[[Stores], object]] = {
    "highest_sequence_nr": lambda stores: stores.journal.highest_sequence_nr(PersistenceId("p")),
    "initialize": lambda stores: stores.tokens.initialize("child", segment_count=1),
    "migrate": lambda stores: stores.migrate(),
}


STORES = r"the stores of (SQLite database|PostgreSQL at) \S+"
JOURNAL = "this Journal"


@pytest.mark.parametrize("call", CALLS)
def test_stores_used_in_a_forked_child_are_refused(stores: Stores, call: str) -> None:
    stores.tokens.initialize("parent", segment_count=1)

    outcome = in_forked_child(lambda: CALLS[call](stores))

    assert_refused(outcome, STORES)
    assert stores.tokens.processors() == ["parent"]  # nothing was written, the parent goes on


def test_stores_closed_in_a_forked_child_stay_open_in_the_parent(stores: Stores) -> None:
    def close_then_read() -> object:
        stores.close()  # the parent's connections: left alone
        return stores.tokens.processors()

    outcome = in_forked_child(close_then_read)

    assert_refused(outcome, STORES)
    stores.tokens.initialize("parent", segment_count=1)
    assert stores.tokens.processors() == ["parent"]


def test_a_journal_used_in_a_forked_child_is_refused(journal_factory: JournalFactory) -> None:
    journal = journal_factory(settings=BATCHED)  # a flusher thread, which the child lacks
    journal.append("p", [NewEvent.of("parent", tags={"t"})])

    appended = in_forked_child(lambda: journal.append("p", [NewEvent.of("child", tags={"t"})]))
    flushed = in_forked_child(journal.flush)
    closed = in_forked_child(journal.close)

    assert_refused(appended, JOURNAL)
    assert_refused(flushed, JOURNAL)
    assert closed == ChildOutcome(value=None)  # nothing done: the parent's to close
    journal.append("p", [NewEvent.of("parent again", tags={"t"})])
    assert payloads(journal, "p") == ["parent", "parent again"]


def test_a_query_used_in_a_forked_child_is_refused(journal_url: str) -> None:
    with stores_at(journal_url):
        pass  # the journal a query reads must exist
    with events_by_tag_at(journal_url) as queries:
        outcome = in_forked_child(lambda: queries.current("t").next_batch())

        assert_refused(outcome, STORES)
        assert queries.current("t").next_batch() == []


def test_a_processor_started_in_a_forked_child_on_its_parents_stores_is_refused(
    stores: Stores,
) -> None:
    processor = TrackingProcessor(
        "forked", source(stores), stores.tokens, lambda *_: None, settings=FAST
    )

    outcome = in_forked_child(processor.start)

    assert_refused(outcome, STORES)
    assert stores.tokens.processors() == []
