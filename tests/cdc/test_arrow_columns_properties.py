"""The change log's columns built from buffers are the arrays `pa.array` builds.

`ordo.storage.parquet.arrow_columns` replaced `pa.array` (which imports pandas) in the change
log's files: the same values, nulls and types, whatever mix of nulls a column holds, and a text
column holding the separator its fast path joins with.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ordo.storage.parquet.arrow_columns import int64_array, string_array

int64s = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@given(st.lists(st.none() | int64s))
@example([])
@example([None, None])
def test_an_int64_column_is_what_pa_array_makes(values: list[int | None]) -> None:
    built = int64_array(values)
    built.validate(full=True)
    assert built.equals(pa.array(values, pa.int64()))


@given(st.lists(st.none() | st.text()))
@example([])
@example([None])
@example(["é", "", "a\x00b", None])  # the separator: encoded value by value
def test_a_string_column_is_what_pa_array_makes(values: list[str | None]) -> None:
    built = string_array(values)
    built.validate(full=True)
    assert built.equals(pa.array(values, pa.string()))


@pytest.mark.parametrize("values", [[2**63], [None, -(2**63) - 1]])
def test_an_integer_beyond_64_bits_is_refused(values: list[int | None]) -> None:
    with pytest.raises(OverflowError):
        int64_array(values)


@pytest.mark.parametrize("values", [["\ud800"], [None, "a", "\udcff"], ["\x00", "\ud800"]])
def test_a_lone_surrogate_is_refused(values: list[str | None]) -> None:
    with pytest.raises(UnicodeEncodeError):
        string_array(values)


@given(st.lists(st.none() | st.text(max_size=6)), st.integers(min_value=1, max_value=10))
@example(["abc", "de", None, "fghijkl"], 4)  # a text longer than a chunk: a chunk of its own
def test_a_string_column_beyond_a_chunk_is_chunked(values: list[str | None], size: int) -> None:
    """A column of more text than 32-bit offsets can hold comes as several arrays, each of at
    most a chunk's characters (unless one text alone is longer), as `pa.array` splits it."""
    built = string_array(values, chunk_characters=size)
    chunks = built.chunks if isinstance(built, pa.ChunkedArray) else [built]
    for chunk in chunks:
        chunk.validate(full=True)
        texts = [text for text in chunk.to_pylist() if text]
        assert len(texts) <= 1 or sum(map(len, texts)) <= size
    assert pa.chunked_array(chunks, pa.string()).equals(
        pa.chunked_array([pa.array(values, pa.string())])
    )


@given(st.lists(st.none() | st.text(max_size=6)), st.integers(min_value=1, max_value=10))
@example(["\U0001d11e", "\U0001d11e"], 2)  # 2 characters, but 9 bytes joined: over 4 x 2
def test_a_chunk_joined_with_its_separators_fits_four_bytes_a_character(
    values: list[str | None], size: int
) -> None:
    """A chunk's texts are joined with a separator each to be encoded at once: with the
    separators, its UTF-8 must stay within 4 bytes per character of the chunk, the bound that
    keeps a real chunk's 32-bit offsets from overflowing (unless one text alone is longer)."""
    built = string_array(values, chunk_characters=size)
    for chunk in built.chunks if isinstance(built, pa.ChunkedArray) else [built]:
        texts = [text for text in chunk.to_pylist() if text is not None]
        joined = "\x00".join(texts).encode()
        assert len(texts) <= 1 or len(joined) <= 4 * size
