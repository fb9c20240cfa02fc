"""The journal's contract, run once per backend through `journal_url`: appends and replays.

Every field round trips, events outlive the journal, sequence numbers count per persistence
id (and per tag), any Unicode id or tag is kept, and replays read inclusive ranges.
"""

from __future__ import annotations

import unicodedata

import pytest

from journal_support import IMMEDIATE, JournalFactory, events_of, payloads, tag_names
from ordo import Journal, NewEvent
from ordo.storage.stores import Stores
from ordo.types import Tag


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


def test_json_payloads_come_back_as_json_reads_what_it_wrote(journal: Journal) -> None:
    """As README says: tuples as lists, non-text object keys as text (not refused)."""
    journal.append("p", [NewEvent.of({"t": (1, 2), 2: "a", True: None, None: 2.5})])

    assert payloads(journal, "p") == [{"t": [1, 2], "2": "a", "true": None, "null": 2.5}]


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
        entries = list(stores.tag_views.tag_view_entries(Tag(tag)))
        assert sorted(e.persistence_id for e in entries) == sorted(pids)


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
