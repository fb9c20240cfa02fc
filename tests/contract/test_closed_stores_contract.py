"""Stores used after close(), on both backends: StoresClosedError before anything is read or
written. An SQLite datastore opened new connections that nothing closed (reads and writes went
on), a PostgreSQL one failed as StorageUnavailableError ("pool already closed"): an outage,
which a tracking processor or a live query retried for ever.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ordo.errors import AlreadyRunningError, StoresClosedError
from ordo.processing.processor import TrackingProcessor
from ordo.storage.open import events_by_tag_at, open_stores, stores_at
from ordo.storage.stores import Stores
from ordo.types import PersistenceId
from processing_support import FAST, source, wait_for

CALLS: dict[str, Callable[[Stores], object]] = {
    "highest_sequence_nr": lambda stores: stores.journal.highest_sequence_nr(PersistenceId("p")),
    "persistence_ids": lambda stores: list(stores.journal.persistence_ids()),
    "entries": lambda stores: stores.tokens.entries("before"),
    "initialize": lambda stores: stores.tokens.initialize("after", segment_count=1),
    "schema_version": lambda stores: stores.schema_version(),
    "table_names": lambda stores: stores.table_names(),
    "migrate": lambda stores: stores.migrate(),
    "schema_tables": lambda stores: list(stores.schemas.tables()),  # CDC stores built after close
    "materializer_progress": lambda stores: stores.change_sink.progress(),
}


@pytest.mark.parametrize("call", CALLS)
def test_closed_stores_refuse_reads_and_writes(journal_url: str, call: str) -> None:
    stores = open_stores(journal_url)
    stores.tokens.initialize("before", segment_count=1)
    stores.close()
    stores.close()  # harmless

    with pytest.raises(StoresClosedError, match=r"used after close\(\)"):
        CALLS[call](stores)

    with stores_at(journal_url) as reopened:
        assert reopened.tokens.processors() == ["before"]  # nothing was written


def test_a_query_used_after_its_block_is_refused(journal_url: str) -> None:
    with stores_at(journal_url):
        pass  # the journal a query reads must exist
    with events_by_tag_at(journal_url) as queries:
        pass

    with pytest.raises(StoresClosedError):
        queries.current("t").next_batch()


def test_a_query_block_can_be_entered_again_each_time_on_new_connections(
    journal_url: str,
) -> None:
    """A second `with` of one events_by_tag_at(...) failed with contextlib's AttributeError."""
    with stores_at(journal_url):
        pass
    blocks = events_by_tag_at(journal_url)
    with blocks as first:
        pass
    with blocks as second:
        assert second.current("t").next_batch() == []

    with pytest.raises(StoresClosedError):
        first.current("t").next_batch()
    with pytest.raises(StoresClosedError):
        second.current("t").next_batch()


def test_a_query_block_entered_while_it_is_open_is_refused(journal_url: str) -> None:
    """One block at a time: the outer block's queries keep working after the refusal."""
    with stores_at(journal_url):
        pass
    blocks = events_by_tag_at(journal_url)
    with blocks as queries:
        with (
            pytest.raises(AlreadyRunningError, match=r"^this events_by_tag_at\(\.\.\.\) is open: "),
            blocks,
        ):
            pass
        assert queries.current("t").next_batch() == []
    with blocks as queries:
        assert queries.current("t").next_batch() == []


def test_a_processor_whose_stores_close_under_it_stops_with_stores_closed_error(
    journal_url: str,
) -> None:
    """Not an outage: the processor stops and keeps the failure instead of retrying for ever,
    and its threads end without an unhandled exception (failed releases are logged).
    """
    stores = open_stores(journal_url)
    processor = TrackingProcessor(
        "closing", source(stores), stores.tokens, lambda *_: None, settings=FAST
    )
    processor.start()
    try:
        wait_for(lambda: all(entry.owner for entry in stores.tokens.entries("closing")))
        stores.close()
        wait_for(lambda: not processor.is_running)
    finally:
        processor.stop()

    assert isinstance(processor.failure, StoresClosedError)
