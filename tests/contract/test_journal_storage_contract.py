"""The journal's contract, run once per backend through `journal_url`: the bucket size the
first write records, `init_storage`, and a closed journal.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

import ordo
from journal_support import IMMEDIATE, JournalFactory, payloads, tag_view_keys
from operations_support import execute
from ordo import (
    BucketSize,
    BucketSizeMismatchError,
    ConfigurationError,
    EventsByTagSettings,
    NewEvent,
    QuerySettings,
    StorageAccessError,
)
from ordo.errors import JournalClosedError
from ordo.storage.open import events_by_tag_at, stores_at
from ordo.storage.stores import Stores


def test_bucket_size_is_recorded_by_the_first_write(
    journal_factory: JournalFactory, stores: Stores
) -> None:
    hourly = EventsByTagSettings(bucket_size=BucketSize.HOUR, flush_interval=timedelta(0))
    daily = EventsByTagSettings(bucket_size=BucketSize.DAY, flush_interval=timedelta(0))
    # Nothing is recorded before the first write: another size may still be chosen.
    journal_factory(settings=hourly).close()
    writer = journal_factory(settings=daily)
    writer.append("p", [NewEvent.of(1, tags=["t"])])
    writer.close()
    before = tag_view_keys(stores)

    with pytest.raises(BucketSizeMismatchError) as raised:
        journal_factory(settings=hourly)

    assert (raised.value.recorded, raised.value.requested) == ("day", "hour")
    assert stores.journal.recorded_bucket_size() == "day"
    assert tag_view_keys(stores) == before
    reopened = journal_factory(settings=daily)
    assert payloads(reopened, "p") == [1]
    assert reopened.append("p", [NewEvent.of(2)]).first_sequence_nr == 2


def test_queries_with_another_bucket_size_than_the_journal_are_refused(
    journal_factory: JournalFactory, journal_url: str
) -> None:
    daily = EventsByTagSettings(bucket_size=BucketSize.DAY, flush_interval=timedelta(0))
    journal_factory(settings=daily).append("p", [NewEvent.of(1, tags=["t"])])

    with pytest.raises(BucketSizeMismatchError) as raised, events_by_tag_at(journal_url):
        pass

    assert (raised.value.recorded, raised.value.requested) == ("day", "hour")
    settled = QuerySettings(eventual_consistency_delay=timedelta(0))
    with events_by_tag_at(journal_url, settings=settled, events_by_tag=daily) as queries:
        assert [envelope.payload for envelope in queries.current("t")] == [1]


def test_a_rejected_bucket_size_leaves_no_flusher_thread_behind(
    journal_factory: JournalFactory,
) -> None:
    writer = journal_factory(settings=EventsByTagSettings(bucket_size=BucketSize.DAY))
    writer.append("p", [NewEvent.of(1)])
    writer.close()
    flushers_before = {t for t in threading.enumerate() if t.name == "ordo-tag-flusher"}

    with pytest.raises(BucketSizeMismatchError):
        journal_factory(settings=EventsByTagSettings(bucket_size=BucketSize.MINUTE))

    flushers_after = {t for t in threading.enumerate() if t.name == "ordo-tag-flusher"}
    assert flushers_after == flushers_before


def test_init_storage_is_idempotent(journal_url: str) -> None:
    first = ordo.init_storage(journal_url)
    second = ordo.init_storage(journal_url)

    assert first.is_changed
    assert first.previous_version == 0
    assert not second.is_changed
    assert second.previous_version == second.version == first.version
    with ordo.open_journal(journal_url) as journal:
        journal.append("p", [NewEvent.of(1)])
    assert not ordo.init_storage(journal_url).is_changed
    with ordo.open_journal(journal_url) as journal:
        assert payloads(journal, "p") == [1]


def test_init_storage_records_a_bucket_size_it_is_given(journal_url: str) -> None:
    first = ordo.init_storage(journal_url, bucket_size=BucketSize.DAY)
    again = ordo.init_storage(journal_url, bucket_size=BucketSize.DAY)

    assert (first.is_changed, first.previous_bucket_size, first.bucket_size) == (True, None, "day")
    assert (again.is_changed, again.previous_bucket_size) == (False, "day")
    with pytest.raises(BucketSizeMismatchError):
        ordo.init_storage(journal_url, bucket_size=BucketSize.HOUR)
    with pytest.raises(BucketSizeMismatchError):
        ordo.open_journal(journal_url)  # the default bucket size, hour
    assert ordo.init_storage(journal_url).bucket_size == "day"


@pytest.mark.parametrize("bad", ["weekly", "", 3, b"hour"])
def test_init_storage_refuses_an_unknown_bucket_size_and_records_nothing(
    journal_url: str, bad: object
) -> None:
    """It was recorded as given, and no journal or query could open the journal after."""
    with pytest.raises(ConfigurationError, match="bucket_size"):
        ordo.init_storage(journal_url, bucket_size=bad)  # type: ignore[arg-type]

    assert ordo.init_storage(journal_url).bucket_size is None
    with ordo.open_journal(journal_url) as journal:
        journal.append("p", [NewEvent.of(1)])
    assert ordo.init_storage(journal_url, bucket_size="HOUR").bucket_size == "hour"  # type: ignore[arg-type]


def test_init_storage_refuses_a_table_of_ordos_names_that_is_not_ordos(journal_url: str) -> None:
    """An application's `tokens` table (its users' tokens) was taken for ordo's: init made the
    other tables around it and recorded the latest schema, and processors failed later on
    "no such column"."""
    execute(journal_url, "CREATE TABLE tokens (id INTEGER PRIMARY KEY, secret TEXT)")

    with pytest.raises(StorageAccessError, match="holds a table tokens that is not ordo's"):
        ordo.init_storage(journal_url)
    with stores_at(journal_url, mode="read") as stores:
        assert (stores.schema_version(), stores.table_names()) == (0, ["tokens"])


def test_a_closed_journal_rejects_writes_and_reads(journal_factory: JournalFactory) -> None:
    journal = journal_factory(settings=IMMEDIATE)
    journal.append("p", [NewEvent.of(1)])
    journal.close()
    journal.close()  # idempotent

    with pytest.raises(JournalClosedError):
        journal.append("p", [NewEvent.of(2)])
    with pytest.raises(JournalClosedError):
        journal.recover("p")
    with pytest.raises(JournalClosedError):
        journal.delete_to("p", 1)
    with pytest.raises(JournalClosedError):
        journal.replay("p")
    with pytest.raises(JournalClosedError):
        journal.highest_sequence_nr("p")
    with pytest.raises(JournalClosedError):
        journal.persistence_ids()
