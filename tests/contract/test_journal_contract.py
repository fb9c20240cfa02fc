"""The journal's contract, run once per backend through `journal_url`.

Appends and replays, sequence numbers, optimistic concurrency (also between two journals on one
database), deletion, ranges, the recorded bucket size, `init_storage`, and bad input, which must
leave everything as it was.
"""

from __future__ import annotations

import threading
import unicodedata
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import ordo
from ordo import (
    BucketSize,
    BucketSizeMismatchError,
    ConcurrencyConflictError,
    ConfigurationError,
    EventsByTagSettings,
    InvalidIdentifierError,
    InvalidInputError,
    InvalidSequenceNrError,
    Journal,
    NewEvent,
    PersistedEvent,
    QuerySettings,
    SerializationError,
)
from ordo.clock import ManualClock
from ordo.errors import JournalClosedError, StorageUnavailableError
from ordo.storage.open import Stores, events_by_tag_at

JournalFactory = Callable[..., Journal]

IMMEDIATE = EventsByTagSettings(flush_interval=timedelta(0))
BATCHED = EventsByTagSettings(flush_interval=timedelta(hours=1), max_message_batch_size=3)
STILL_NS = int(datetime(2026, 3, 1, 12, 30, tzinfo=UTC).timestamp()) * 10**9


def still_clock() -> ManualClock:
    """A clock that does not move: no new time bucket ever cuts a batch short."""
    return ManualClock(STILL_NS)


@pytest.fixture
def journal(journal_factory: JournalFactory) -> Journal:
    return journal_factory(settings=IMMEDIATE)


def events_of(journal: Journal, pid: str, **kwargs: int) -> list[PersistedEvent]:
    return list(journal.replay(pid, **kwargs))


def payloads(journal: Journal, pid: str, **kwargs: int) -> list[object]:
    return [event.payload for event in journal.replay(pid, **kwargs)]


def tag_names(stores: Stores) -> list[str]:
    return [summary.tag for summary in stores.tag_views.tags()]


def tag_view_keys(stores: Stores) -> list[tuple[object, ...]]:
    """Every tag_views row key, to compare before and after."""
    return [
        (e.tag, e.time_bucket, e.timeuuid, e.persistence_id, e.sequence_nr, e.tag_pid_sequence_nr)
        for tag in tag_names(stores)
        for e in stores.tag_views.tag_view_entries(tag)
    ]


def snapshot(journal: Journal, stores: Stores) -> object:
    """Everything a rejected call must leave unchanged."""
    journal.flush()
    pids = list(journal.persistence_ids())
    return (
        pids,
        {pid: (journal.highest_sequence_nr(pid), events_of(journal, pid)) for pid in pids},
        tag_view_keys(stores),
        {pid: dict(stores.tag_views.read_progress(pid)) for pid in pids},
    )


# --- append and replay -------------------------------------------------------------------------


def test_append_then_replay_round_trips_every_field(journal: Journal) -> None:
    sent = [
        NewEvent.of(b"\x00\xffraw bytes", manifest="Raw"),
        NewEvent.of(
            {"name": "ü 🙂", "items": [1, 2.5, None, True]},
            manifest="OrderPlaced/v2",
            metadata={"trace": "abc", "n": 1},
            tags=["orders", "eu"],
        ),
        NewEvent.of("a string", tags=["orders"]),
        NewEvent.of(42),
        NewEvent.of([]),
        NewEvent.of(None, metadata={}),
    ]

    receipt = journal.append("order-1", sent)

    replayed = events_of(journal, "order-1")
    assert receipt.persistence_id == "order-1"
    assert (receipt.first_sequence_nr, receipt.last_sequence_nr) == (1, 6)
    assert [e.sequence_nr for e in replayed] == [1, 2, 3, 4, 5, 6]
    assert [e.persistence_id for e in replayed] == ["order-1"] * 6
    assert [e.payload for e in replayed] == [event.payload for event in sent]
    assert [e.serializer for e in replayed] == ["bytes"] + ["json"] * 5
    assert [e.manifest for e in replayed] == ["Raw", "OrderPlaced/v2", "", "", "", ""]
    assert [e.metadata for e in replayed] == [None, {"trace": "abc", "n": 1}, None, None, None, {}]
    assert [dict(e.tags) for e in replayed] == [
        {},
        {"eu": 1, "orders": 1},
        {"orders": 2},
        {},
        {},
        {},
    ]
    assert [e.writer_uuid for e in replayed] == [journal.writer_uuid] * 6
    assert tuple(e.timeuuid for e in replayed) == receipt.offsets
    assert list(receipt.offsets) == sorted(receipt.offsets)
    assert len(set(receipt.offsets)) == 6


def test_bytes_like_payloads_come_back_as_bytes(journal: Journal) -> None:
    journal.append("p", [NewEvent.of(bytearray(b"ab")), NewEvent.of(memoryview(b"cd"))])

    assert payloads(journal, "p") == [b"ab", b"cd"]


def test_events_survive_closing_and_reopening(journal_factory: JournalFactory) -> None:
    first = journal_factory(settings=IMMEDIATE)
    first.append("p", [NewEvent.of({"n": 1}, tags=["t"]), NewEvent.of(b"two", manifest="m")])
    before = events_of(first, "p")
    first.close()

    second = journal_factory(settings=IMMEDIATE)
    assert events_of(second, "p") == before
    receipt = second.append("p", [NewEvent.of(3, tags=["t"])])

    assert receipt.first_sequence_nr == 3
    assert events_of(second, "p")[-1].tags == {"t": 2}


def test_sequence_nrs_start_at_1_and_count_per_persistence_id(journal: Journal) -> None:
    a1 = journal.append("a", [NewEvent.of(1), NewEvent.of(2)])
    b1 = journal.append("b", [NewEvent.of(1)])
    a2 = journal.append("a", [NewEvent.of(3)])

    assert (a1.first_sequence_nr, a1.last_sequence_nr) == (1, 2)
    assert (b1.first_sequence_nr, b1.last_sequence_nr) == (1, 1)
    assert (a2.first_sequence_nr, a2.last_sequence_nr) == (3, 3)
    assert [e.sequence_nr for e in journal.replay("a")] == [1, 2, 3]
    assert [e.sequence_nr for e in journal.replay("b")] == [1]


def test_tag_pid_sequence_nrs_count_per_persistence_id_and_tag(journal: Journal) -> None:
    journal.append("a", [NewEvent.of(1, tags=["x"]), NewEvent.of(2, tags=["x", "y"])])
    journal.append("b", [NewEvent.of(1, tags=["y"])])
    journal.append("a", [NewEvent.of(3), NewEvent.of(4, tags=["y"]), NewEvent.of(5, tags=["x"])])

    assert [dict(e.tags) for e in journal.replay("a")] == [
        {"x": 1},
        {"x": 2, "y": 1},
        {},
        {"y": 2},
        {"x": 3},
    ]
    assert [dict(e.tags) for e in journal.replay("b")] == [{"y": 1}]


def test_arbitrary_unicode_persistence_ids_and_tags(journal: Journal, stores: Stores) -> None:
    pids = ["ördér-🙂", "名前 with spaces", "a'b\"c;--", "100%_x", "x" * 255, "p", "p ", "P"]
    pids += [unicodedata.normalize("NFC", "é"), unicodedata.normalize("NFD", "é")]
    tags = ["tag with spaces", "🙂", "ü-tag", "%", "t" * 255, 'quote"back\\slash', "1", "null"]
    tags += ["$.a[0]", unicodedata.normalize("NFC", "é"), unicodedata.normalize("NFD", "é")]
    for pid in pids:
        journal.append(pid, [NewEvent.of({"pid": pid}, tags=tags)])

    assert sorted(journal.persistence_ids()) == sorted(pids)
    assert sorted(tag_names(stores)) == sorted(tags)
    for pid in pids:
        [event] = events_of(journal, pid)
        assert event.persistence_id == pid
        assert event.payload == {"pid": pid}
        assert event.tags == dict.fromkeys(tags, 1)
        assert journal.highest_sequence_nr(pid) == 1
    for tag in tags:
        entries = list(stores.tag_views.tag_view_entries(tag))
        assert sorted(e.persistence_id for e in entries) == sorted(pids)


# --- optimistic concurrency ---------------------------------------------------------------------


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


# --- reading ------------------------------------------------------------------------------------


def test_highest_sequence_nr(journal: Journal) -> None:
    assert journal.highest_sequence_nr("nobody") == 0
    journal.append("p", [NewEvent.of(1), NewEvent.of(2)])
    journal.append("p", [NewEvent.of(3)])

    assert journal.highest_sequence_nr("p") == 3
    assert journal.highest_sequence_nr("nobody") == 0


def test_persistence_ids_lists_each_id_once_in_order(journal: Journal) -> None:
    assert list(journal.persistence_ids()) == []
    for pid in ["c-3", "a-1", "b-2", "a-1", "c-3"]:
        journal.append(pid, [NewEvent.of(pid)])

    assert list(journal.persistence_ids()) == ["a-1", "b-2", "c-3"]


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, [1, 2, 3, 4, 5]),
        ({"from_sequence_nr": 2, "to_sequence_nr": 4}, [2, 3, 4]),
        ({"from_sequence_nr": 4}, [4, 5]),
        ({"to_sequence_nr": 1}, [1]),
        ({"from_sequence_nr": 3, "to_sequence_nr": 3}, [3]),
        ({"from_sequence_nr": 3, "to_sequence_nr": 100}, [3, 4, 5]),
        ({"from_sequence_nr": 6}, []),
        ({"from_sequence_nr": 4, "to_sequence_nr": 2}, []),
    ],
)
def test_replay_ranges_are_inclusive(
    journal: Journal, kwargs: dict[str, int], expected: list[int]
) -> None:
    journal.append("p", [NewEvent.of(n) for n in range(1, 6)])

    assert [e.sequence_nr for e in journal.replay("p", **kwargs)] == expected
    assert payloads(journal, "p", **kwargs) == expected


def test_replay_of_an_unknown_id_is_empty(journal: Journal) -> None:
    assert events_of(journal, "nobody") == []


# --- deletion -----------------------------------------------------------------------------------


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
    entries = [e for e in stores.tag_views.tag_view_entries("t") if e.persistence_id == "p"]
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
    assert list(stores.tag_views.tag_view_entries("t")) == []

    journal.delete_to("p", 2)

    entries = list(stores.tag_views.tag_view_entries("t"))
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

    entries = list(stores.tag_views.tag_view_entries("t"))
    assert [(e.sequence_nr, e.tag_pid_sequence_nr) for e in entries] == [(1, 1), (2, 2)]


def test_delete_to_of_an_unknown_id_deletes_nothing(journal: Journal) -> None:
    assert journal.delete_to("nobody", 5) == 0
    assert journal.highest_sequence_nr("nobody") == 0


# --- bucket size and schema ---------------------------------------------------------------------


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


# --- bad input ----------------------------------------------------------------------------------

LONG = "x" * 256


def _good() -> list[NewEvent]:
    return [NewEvent.of(1, tags=["t"])]


BAD_CALLS: list[tuple[str, type[Exception], Callable[[Journal], object]]] = [
    ("empty pid", InvalidIdentifierError, lambda j: j.append("", _good())),
    ("256-char pid", InvalidIdentifierError, lambda j: j.append(LONG, _good())),
    ("NUL in pid", InvalidIdentifierError, lambda j: j.append("p\x00", _good())),
    ("non-str pid", InvalidIdentifierError, lambda j: j.append(7, _good())),  # type: ignore[arg-type]
    ("empty tag", InvalidIdentifierError, lambda j: j.append("p", [NewEvent.of(1, tags=[""])])),
    (
        "256-char tag",
        InvalidIdentifierError,
        lambda j: j.append("p", [NewEvent.of(1, tags=[LONG])]),
    ),
    (
        "NUL in tag",
        InvalidIdentifierError,
        lambda j: j.append("p", [NewEvent.of(1, tags=["a\x00"])]),
    ),
    (
        "unchecked bad tag",
        InvalidIdentifierError,
        lambda j: j.append("p", [NewEvent(payload=1, tags=frozenset({""}))]),
    ),
    ("object payload", SerializationError, lambda j: j.append("p", [NewEvent.of(object())])),
    ("NaN payload", SerializationError, lambda j: j.append("p", [NewEvent.of(float("nan"))])),
    (
        "bad metadata value",
        SerializationError,
        lambda j: j.append("p", [NewEvent.of(1, metadata={"a": object()})]),
    ),
    (
        "non-dict metadata",
        SerializationError,
        lambda j: j.append("p", [NewEvent.of(1, metadata=[1])]),  # type: ignore[arg-type]
    ),
    (
        "one bad event among good ones",
        SerializationError,
        lambda j: j.append("p", [NewEvent.of(2, tags=["t"]), NewEvent.of({1, 2})]),
    ),
    (
        "non-str manifest",
        InvalidInputError,
        lambda j: j.append("p", [NewEvent(payload=1, manifest=5)]),  # type: ignore[arg-type]
    ),
    ("no events", InvalidInputError, lambda j: j.append("p", [])),
    (
        "a dict among the events",
        InvalidInputError,
        lambda j: j.append("p", [*_good(), {"payload": 1}]),  # type: ignore[list-item]
    ),
    ("a string as the events", InvalidInputError, lambda j: j.append("p", "abc")),  # type: ignore[arg-type]
    # These three were a TypeError (not iterable) and an IndexError.
    ("a number as the events", InvalidInputError, lambda j: j.append("p", 1.5)),  # type: ignore[arg-type]
    ("one event not in a list", InvalidInputError, lambda j: j.append("p", NewEvent.of(1))),  # type: ignore[arg-type]
    ("an empty iterator", InvalidInputError, lambda j: j.append("p", iter([]))),  # type: ignore[arg-type]
    (
        "falsy non-str manifest",
        InvalidInputError,
        lambda j: j.append("p", [NewEvent(payload=1, manifest=None)]),  # type: ignore[arg-type]
    ),
    (
        "negative expected",
        InvalidSequenceNrError,
        lambda j: j.append("p", _good(), expected_sequence_nr=-1),
    ),
    (
        "bool expected",
        InvalidSequenceNrError,
        lambda j: j.append("p", _good(), expected_sequence_nr=True),
    ),
    ("zero from", InvalidSequenceNrError, lambda j: j.replay("p", from_sequence_nr=0)),
    ("negative from", InvalidSequenceNrError, lambda j: j.replay("p", from_sequence_nr=-3)),
    ("zero to", InvalidSequenceNrError, lambda j: j.replay("p", to_sequence_nr=0)),
    ("str from", InvalidSequenceNrError, lambda j: j.replay("p", from_sequence_nr="1")),  # type: ignore[arg-type]
    ("bad pid replay", InvalidIdentifierError, lambda j: j.replay("")),
    ("bad pid highest", InvalidIdentifierError, lambda j: j.highest_sequence_nr(LONG)),
    ("bad pid recover", InvalidIdentifierError, lambda j: j.recover("a\x00")),
    ("zero delete_to", InvalidSequenceNrError, lambda j: j.delete_to("p", 0)),
    ("negative delete_to", InvalidSequenceNrError, lambda j: j.delete_to("p", -1)),
    ("huge delete_to", InvalidSequenceNrError, lambda j: j.delete_to("p", 2**70)),
    ("huge to", InvalidSequenceNrError, lambda j: j.replay("p", to_sequence_nr=2**63)),
    (
        "tags as one string",
        InvalidInputError,
        lambda j: j.append("p", [NewEvent(payload=1, tags="order")]),  # type: ignore[arg-type]
    ),
    ("bad pid delete_to", InvalidIdentifierError, lambda j: j.delete_to("", 1)),
    # Lone surrogates are not Unicode characters: no UTF-8 database can store them.
    ("surrogate in pid", InvalidIdentifierError, lambda j: j.append("p\ud800", _good())),
    (
        "surrogate in tag",
        InvalidIdentifierError,
        lambda j: j.append("p", [NewEvent(payload=1, tags=frozenset({"t\udcff"}))]),
    ),
    ("surrogate in payload", SerializationError, lambda j: j.append("p", [NewEvent.of("\ud800")])),
    (
        "surrogate in metadata",
        SerializationError,
        lambda j: j.append("p", [NewEvent.of(1, metadata={"k": "\udfff"})]),
    ),
    (
        "surrogate in manifest",
        InvalidInputError,
        lambda j: j.append("p", [NewEvent.of(1, manifest="m\ud800")]),
    ),
]


@pytest.mark.parametrize(
    ("error", "call"),
    [pytest.param(error, call, id=name) for name, error, call in BAD_CALLS],
)
def test_bad_input_is_rejected_and_changes_nothing(
    journal: Journal,
    stores: Stores,
    error: type[Exception],
    call: Callable[[Journal], object],
) -> None:
    journal.append("p", [NewEvent.of(0, tags=["t"]), NewEvent.of(1)])
    before = snapshot(journal, stores)

    with pytest.raises(error):
        call(journal)

    assert snapshot(journal, stores) == before
    # The journal is still usable afterwards.
    assert journal.append("p", _good()).first_sequence_nr == 3


def test_bad_tags_are_rejected_when_the_event_is_built() -> None:
    for bad in ["", LONG, "a\x00b"]:
        with pytest.raises(InvalidIdentifierError):
            NewEvent.of(1, tags=[bad])
    for collection in ["order", b"order", None, 5]:  # a string is not split into tags
        with pytest.raises(InvalidInputError, match="tags must be a collection, got "):
            NewEvent.of(1, tags=collection)  # type: ignore[arg-type]


@pytest.mark.parametrize("writer_uuid", [5, True, 0, "", b"w", "w\x00"])
def test_a_writer_uuid_that_is_no_identifier_is_refused(
    stores: Stores, writer_uuid: object
) -> None:
    """It is stored with every event and lease.

    5 was stored as a number, 0 and "" became a random uuid, and a NUL failed PostgreSQL's
    first append as a StorageError.
    """
    with pytest.raises(InvalidIdentifierError, match=r"^writer_uuid "):
        Journal(stores.journal, stores.tag_views, writer_uuid=writer_uuid)  # type: ignore[arg-type]
    journal = Journal(stores.journal, stores.tag_views, writer_uuid="writer-1")
    try:
        journal.append("p", [NewEvent.of(1)])
        assert [event.writer_uuid for event in journal.replay("p")] == ["writer-1"]
    finally:
        journal.close()


def test_queries_of_a_missing_journal_are_refused_and_create_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "typo.db"
    with (
        pytest.raises(StorageUnavailableError, match="no journal at"),
        events_by_tag_at(f"sqlite:///{missing}"),
    ):
        pass
    assert not missing.exists()


def test_the_longest_identifiers_are_accepted(journal: Journal) -> None:
    pid, tag = "p" * 255, "t" * 255
    journal.append(pid, [NewEvent.of(1, tags=[tag])])

    assert [e.tags for e in journal.replay(pid)] == [{tag: 1}]


def test_a_manifest_is_stored_as_given_or_rejected_as_input(
    journal: Journal, stores: Stores
) -> None:
    """A NUL in the manifest: either it round trips, or it is bad input and nothing changes."""
    journal.append("p", [NewEvent.of(1)])
    before = snapshot(journal, stores)

    try:
        journal.append("p", [NewEvent.of(2, manifest="a\x00b")])
    except InvalidInputError:
        assert snapshot(journal, stores) == before
    else:
        assert [e.manifest for e in journal.replay("p")] == ["", "a\x00b"]


@pytest.mark.parametrize("clock", [5, "now", 0, datetime.now])
def test_a_clock_that_is_not_one_is_refused_before_anything_is_created(
    tmp_path: Path, clock: object
) -> None:
    """It was an AttributeError at the first append, after the journal file was created.

    A falsy one (0) was silently the system clock.
    """
    url = f"sqlite:///{tmp_path / 'j.db'}"
    with pytest.raises(ConfigurationError, match=r"^clock must be a Clock"):
        ordo.open_journal(url, clock=clock)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []
    ordo.init_storage(url)
    with (
        pytest.raises(ConfigurationError, match=r"^clock must be a Clock"),
        events_by_tag_at(url, clock=clock),  # type: ignore[arg-type]
    ):
        pass
