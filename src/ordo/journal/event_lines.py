"""The JSON-lines input format of `ordo append`: one event per line, validated before writing."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from ordo.documents import (
    BYTE_ORDER_MARK,
    USER_JSON_DECODER,
    NumberOutOfRangeError,
    decode_json,
    reject_unknown_keys,
)
from ordo.errors import InvalidInputError, OrdoError
from ordo.journal import validation
from ordo.journal.event import NewEvent
from ordo.journal.serialization import serialize_metadata, serialize_payload
from ordo.types import PersistenceId

_KEYS = ("persistence_id", "payload", "tags", "manifest", "metadata", "expected_sequence_nr")


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendRequest:
    """Consecutive events of one persistence id, appended in one atomic call."""

    persistence_id: PersistenceId
    events: tuple[NewEvent, ...]
    expected_sequence_nr: int | None
    line: int
    """The number of its first line."""


def parse_event_lines(lines: Iterable[str], *, source: str = "the input") -> list[AppendRequest]:
    """Parse and validate every line; raise InvalidInputError naming the first bad line.

    A line is `{"persistence_id": "...", "payload": ..., "tags": [...]}` with optional
    `manifest`, `metadata` (an object) and `expected_sequence_nr`. Consecutive lines of the same
    persistence id become one atomic append; a line with `expected_sequence_nr` starts a new one.
    Nothing is written by this function, so a bad line anywhere means nothing is appended.
    """
    requests: list[AppendRequest] = []
    for number, line in enumerate(_text_lines(lines, source), 1):
        if not line.strip():
            continue
        try:
            pid, event, expected = _parse_line(line)
        except OrdoError as exc:
            msg = f"line {number}: {exc}"
            raise InvalidInputError(msg) from exc
        last = requests[-1] if requests else None
        if last is not None and last.persistence_id == pid and expected is None:
            requests[-1] = replace(last, events=(*last.events, event))
        else:
            requests.append(
                AppendRequest(
                    persistence_id=pid, events=(event,), expected_sequence_nr=expected, line=number
                )
            )
    return requests


def _text_lines(lines: Iterable[str], source: str) -> Iterator[str]:
    """The lines of a text stream (a byte-order mark skipped); InvalidInputError if undecodable.

    The stream is the caller's (stdin as Python decodes it, or a file), so the mark is skipped
    from its first line here rather than by decoding with `USER_TEXT_ENCODING`. A decoder reads
    ahead in chunks, so the line that does not decode is not known: the error names `source`
    instead (a file of another encoding, binary input), as `ordo cdc ingest` does.
    """
    try:
        for number, line in enumerate(lines):
            yield line if number else line.removeprefix(BYTE_ORDER_MARK)
    except UnicodeDecodeError as exc:
        msg = f"{source} is not UTF-8 text ({exc.reason})"
        raise InvalidInputError(msg) from exc


def _parse_line(line: str) -> tuple[PersistenceId, NewEvent, int | None]:
    """One line's event; InvalidInputError when it is not one ordo stores as the line says.

    Its numbers are read as `ordo cdc ingest` reads them (`USER_JSON_DECODER`): a number a
    double would round (`0.10000000000000000001`, `1e-400`) was appended as another (0.1, 0.0)
    without a word. Such a number is valid JSON, so its error is not called invalid JSON.
    """
    try:
        document = decode_json(line, USER_JSON_DECODER)
    except NumberOutOfRangeError as exc:
        raise InvalidInputError(str(exc)) from exc
    except ValueError as exc:  # NaN, and an integer longer than Python reads too
        msg = f"not valid JSON: {exc}"
        raise InvalidInputError(msg) from exc
    if not isinstance(document, dict):
        msg = "each line must be a JSON object"
        raise InvalidInputError(msg)
    reject_unknown_keys(document, _KEYS, where="the event", error=InvalidInputError)
    for key in ("persistence_id", "payload"):  # a missing id was "must be a string, got NoneType"
        if key not in document:
            msg = f"missing key {key}"
            raise InvalidInputError(msg)
    pid = validation.persistence_id(document.get("persistence_id"))
    tags = document.get("tags", [])
    if not isinstance(tags, list):
        msg = "tags must be a list of strings"
        raise InvalidInputError(msg)
    manifest = validation.text(document.get("manifest", ""), name="manifest")
    metadata = document.get("metadata")
    serialize_metadata(metadata)
    expected = document.get("expected_sequence_nr")
    if expected is not None:
        expected = validation.sequence_nr(expected, name="expected_sequence_nr", minimum=0)
    serialize_payload(document["payload"])  # a lone surrogate: refused here
    event = NewEvent.of(document["payload"], tags=tags, manifest=manifest, metadata=metadata)
    return pid, event, expected
