"""How payloads and metadata become bytes and text in storage, and back."""

from __future__ import annotations

import json
from enum import StrEnum

from ordo.errors import SerializationError

# One encoder instance: json.dumps() with options builds a new encoder on every call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


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


def deserialize_payload(serializer: str, data: bytes) -> object:
    """Invert serialize_payload(); called lazily when an envelope's payload is read."""
    if serializer == Serializer.BYTES:
        return data
    return json.loads(data)


def serialize_metadata(metadata: object) -> str | None:
    """Metadata is an optional JSON object; None stays None."""
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        msg = f"metadata must be a JSON object (dict), got {type(metadata).__name__}"
        raise SerializationError(msg)
    return _dumps(metadata, what="metadata").decode("utf-8")


def deserialize_metadata(text: str | None) -> dict[str, object] | None:
    """Invert serialize_metadata()."""
    if text is None:
        return None
    decoded: dict[str, object] = json.loads(text)
    return decoded


def _dumps(value: object, *, what: str) -> bytes:
    try:
        return _ENCODER.encode(value).encode("utf-8")
    except (TypeError, ValueError) as exc:
        msg = f"{what} is neither bytes nor JSON-serializable: {exc}"
        raise SerializationError(msg) from exc
