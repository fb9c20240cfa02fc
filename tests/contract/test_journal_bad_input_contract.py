"""The journal's contract, run once per backend through `journal_url`: bad input, which
must leave everything as it was, and the limits of what is accepted.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest

import ordo
from journal_support import snapshot
from ordo import (
    ConfigurationError,
    InvalidIdentifierError,
    InvalidInputError,
    InvalidSequenceNrError,
    Journal,
    NewEvent,
    SerializationError,
)
from ordo.errors import StorageUnavailableError
from ordo.storage.open import events_by_tag_at
from ordo.storage.stores import Stores
from ordo.types import Tag

LONG = "x" * 256


def _good() -> list[NewEvent]:
    return [NewEvent.of(1, tags=["t"])]


def _circular() -> dict[str, object]:
    """A JSON object that contains itself."""
    value: dict[str, object] = {"a": 1}
    value["self"] = [value]
    return value


def _too_deep() -> list[object]:
    """Lists nested past Python's recursion limit: no JSON encoder of the stdlib writes them."""
    value: list[object] = []
    for _ in range(sys.getrecursionlimit() + 10):
        value = [value]
    return value


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
        lambda j: j.append("p", [NewEvent(payload=1, tags=frozenset({Tag("")}))]),
    ),
    ("object payload", SerializationError, lambda j: j.append("p", [NewEvent.of(object())])),
    ("NaN payload", SerializationError, lambda j: j.append("p", [NewEvent.of(float("nan"))])),
    ("circular payload", SerializationError, lambda j: j.append("p", [NewEvent.of(_circular())])),
    # A RecursionError left the append.
    ("too deep payload", SerializationError, lambda j: j.append("p", [NewEvent.of(_too_deep())])),
    (
        "circular metadata",
        SerializationError,
        lambda j: j.append("p", [NewEvent.of(1, metadata=_circular())]),
    ),
    (
        "too deep metadata",
        SerializationError,
        lambda j: j.append("p", [NewEvent.of(1, metadata={"a": _too_deep()})]),
    ),
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
        lambda j: j.append("p", [NewEvent(payload=1, tags=frozenset({Tag("t\udcff")}))]),
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
