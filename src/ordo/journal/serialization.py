"""How payloads and metadata become bytes and text in storage, and back."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from enum import StrEnum
from json.encoder import encode_basestring
from typing import Any

from ordo.errors import SerializationError, StorageIntegrityError

# One encoder instance: json.dumps() with options builds a new encoder on every call. Without
# the circular check: it kept a dict of every list and dict being encoded, a third of the cost
# of a small payload, while a value that contains itself fails anyway, as nesting deeper than
# the recursion limit (RecursionError, which `_dumps` turns into a SerializationError).
_ENCODER = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False, check_circular=False
)


def _one_shot_encoder() -> Callable[[object], str]:
    """`_ENCODER.encode`, or the same encoding minus its per-call Python set-up.

    An append encodes every payload, and `encode` spends about as long in Python (type checks,
    building `iterencode`'s encoder) as CPython's C encoder then spends on a ~100-byte object.
    So the C encoder is built once, with the arguments `iterencode` builds it with for
    `_ENCODER`; it keeps no state between calls (no markers dict, check_circular being off), so
    threads may share it. Where the accelerator is missing, `_ENCODER.encode`.
    """
    make_encoder = getattr(json.encoder, "c_make_encoder", None)  # not in typeshed
    if make_encoder is None:
        return _ENCODER.encode
    encoder = make_encoder(
        None,  # the markers dict, None without check_circular
        _ENCODER.default,
        encode_basestring,  # what iterencode picks with ensure_ascii off
        _ENCODER.indent,
        _ENCODER.key_separator,
        _ENCODER.item_separator,
        _ENCODER.sort_keys,
        _ENCODER.skipkeys,
        _ENCODER.allow_nan,
    )

    def encode(value: object) -> str:
        return "".join(encoder(value, 0))

    return encode


_encode = _one_shot_encoder()


class Serializer(StrEnum):
    """How a payload was stored; persisted with every event."""

    BYTES = "bytes"
    """The application gave bytes; they are stored untouched."""
    JSON = "json"
    """The application gave a JSON-serializable value; stored as compact UTF-8 JSON."""


def serialize_payload(payload: object) -> tuple[Serializer, bytes]:
    """Turn an application payload into (serializer, bytes) or raise SerializationError."""
    if isinstance(payload, bytes | bytearray | memoryview):
        return Serializer.BYTES, bytes(payload)
    return Serializer.JSON, _dumps(payload, what="payload")


EventKey = tuple[str, int]
"""A stored event's persistence id and sequence nr: what names it when its JSON is damaged."""


def deserialize_payload(serializer: str, data: bytes, *, of: EventKey) -> object:
    """Invert serialize_payload(); called lazily when the payload of event `of` is read."""
    if serializer == Serializer.BYTES:
        return data
    return stored_json(data, what="payload", of=of)


def serialize_metadata(metadata: object) -> str | None:
    """Metadata is an optional JSON object; None stays None."""
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        msg = f"metadata must be a JSON object (dict), got {type(metadata).__name__}"
        raise SerializationError(msg)
    return _dumps(metadata, what="metadata").decode("utf-8")


def deserialize_metadata(text: str | None, *, of: EventKey) -> dict[str, object] | None:
    """Invert serialize_metadata() for the metadata of event `of`."""
    if text is None:
        return None
    decoded: dict[str, object] = stored_json(text, what="metadata", of=of)
    return decoded


def stored_json(text: str | bytes, *, what: str, of: EventKey | str) -> Any:
    """The JSON value stored as `what` of `of`; StorageIntegrityError when it is none.

    `of` is an event's key, or what names another stored row ("message 0 of batch 3 of
    materializer 'm'"). A stored row changed by hand or by another program (an event's
    payload, metadata or tags, a CDC message's key or row, that are no JSON any more) ended
    `ordo events` and `ordo query` with json's traceback, and gave a library caller a bare
    ValueError that did not say which row. No retry mends it; json's error stays the cause. An
    event is named only then: reads decode every event.
    """
    try:
        return json.loads(text)
    except ValueError as exc:  # JSONDecodeError, or bytes that are not UTF-8
        if isinstance(of, str):
            row = of
        else:
            persistence_id, sequence_nr = of
            row = f"event {sequence_nr} of persistence id {persistence_id!r}"
        msg = f"the stored {what} of {row} is not JSON: {exc}"
        raise StorageIntegrityError(msg) from exc


def _dumps(value: object, *, what: str) -> bytes:
    """`value` as compact UTF-8 JSON; SerializationError naming `what` when it is not JSON.

    Nesting deeper than Python's recursion limit, or a value that contains itself, was a
    RecursionError out of the append rather than its SerializationError.
    """
    try:
        return _encode(value).encode("utf-8")
    except (TypeError, ValueError) as exc:
        msg = f"{what} is neither bytes nor JSON-serializable: {exc}"
        raise SerializationError(msg) from exc
    except RecursionError as exc:
        msg = (
            f"{what} is not JSON-serializable: it contains itself, or nests deeper than Python's "
            f"recursion limit ({sys.getrecursionlimit():,})"
        )
        raise SerializationError(msg) from exc
