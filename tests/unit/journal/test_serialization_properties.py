"""Property: payloads and metadata are stored as the json module's compact UTF-8 JSON.

serialization.py encodes through a C encoder it builds itself (the append's hot path), so the
stored bytes are checked here against `json.dumps` with the options the format names.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from ordo.journal.serialization import (
    Serializer,
    deserialize_metadata,
    deserialize_payload,
    serialize_metadata,
    serialize_payload,
)

# Text without lone surrogates: UTF-8 cannot store those (the bad-input contract refuses them).
_text = st.text(st.characters(exclude_categories=["Cs"]))
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_text, children, max_size=4),
    max_leaves=20,
)


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@given(json_values)
def test_a_json_payload_is_stored_as_compact_utf8_json(value: object) -> None:
    serializer, data = serialize_payload(value)

    assert serializer is Serializer.JSON
    assert data == _compact(value).encode("utf-8")
    assert deserialize_payload(serializer, data, of=("p", 1)) == value


@given(st.dictionaries(_text, json_values, max_size=4))
def test_metadata_is_stored_as_compact_json(metadata: dict[str, object]) -> None:
    stored = serialize_metadata(metadata)

    assert stored == _compact(metadata)
    assert deserialize_metadata(stored, of=("p", 1)) == metadata
