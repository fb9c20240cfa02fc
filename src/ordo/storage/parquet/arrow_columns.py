"""Columns of Python values as Arrow arrays, built without pyarrow's look for pandas.

`pa.array` (and `pa.scalar`, `pa.table`, `Table.from_pydict`, ...) first asks whether it was
given a pandas object, and asking imports pandas when it is installed, as the `spark` extra
installs it: 0.3 s of every command that published a change log file, which none of them uses.
These build the same arrays from buffers (`pa.Array.from_buffers`) and Arrow's compute
functions, which take Arrow arrays only and never ask. The change log's writer threads call them
at once: they share no state.
"""

from __future__ import annotations

import array
from collections.abc import Callable, Iterator, Sequence
from itertools import accumulate, compress, repeat
from operator import is_not
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

CHUNK_CHARACTERS = (2**31 - 1) // 4
"""The most characters of one chunk of a text column, a separator counted with each text (`_size`):
a string array's offsets are 32-bit, and a character is at most 4 bytes of UTF-8. A column of
more (a window of large TOAST values) is built as several arrays, one chunked array, as
`pa.array` built it."""
_SEPARATOR = "\x00"
"""What a text column's values are joined with, for Arrow to split them again in one call. No
text the change log stores holds it (`ordo.journal.validation.check_storable`); a column where
one does is encoded value by value instead."""


def int64_array(values: Sequence[int | None]) -> pa.Array:
    """The values as an int64 array, None as null (OverflowError for one beyond 64 bits)."""
    return _with_nulls(values, pa.int64(), _int64s)


def string_array(
    values: Sequence[str | None], *, chunk_characters: int = CHUNK_CHARACTERS
) -> pa.Array | pa.ChunkedArray:
    """The values as a string array, None as null; chunked beyond `chunk_characters`.

    UnicodeEncodeError for a text holding a lone surrogate, which UTF-8 cannot encode.
    """
    if sum(map(_size, values)) <= chunk_characters:
        return _with_nulls(values, pa.string(), _strings)
    chunks = [_with_nulls(chunk, pa.string(), _strings) for chunk in _cut(values, chunk_characters)]
    return pa.chunked_array(chunks, pa.string())


def _cut(values: Sequence[str | None], characters: int) -> Iterator[Sequence[str | None]]:
    """The values in runs of at most `characters` characters (a longer text alone)."""
    start, held = 0, 0
    for end, value in enumerate(values):
        size = _size(value)
        if end > start and held + size > characters:
            yield values[start:end]
            start, held = end, 0
        held += size
    yield values[start:]


def _size(value: str | None) -> int:
    """The characters a text takes of a chunk: its own, and one for its separator.

    `_strings` joins a chunk's texts to encode them at once: counted so, the chunk's UTF-8 stays
    within 4 bytes a character. A null takes none (it is not joined).
    """
    return 0 if value is None else len(value) + 1


def _with_nulls(
    values: Sequence[Any], kind: pa.DataType, dense: Callable[[Sequence[Any]], pa.Array]
) -> pa.Array:
    """`dense(values)`; with a None among them, `dense` of the others put in place among nulls.

    `dense` refuses a None with TypeError (`array.array` and `str.join` do, at the first one),
    so a column without nulls, the common one, is read once.
    """
    try:
        return dense(values)
    except TypeError:
        present = bytes(map(is_not, values, repeat(None)))
    nulls = pa.nulls(len(values), kind)
    if 1 not in present:
        return nulls
    flags = pa.Array.from_buffers(pa.uint8(), len(present), [None, pa.py_buffer(present)])
    others = dense(list(compress(values, present)))
    return pc.replace_with_mask(nulls, flags.cast(pa.bool_()), others)


def _int64s(values: Sequence[Any]) -> pa.Array:
    """Integers as an int64 array: their machine words are its buffer."""
    words = array.array("q", values)
    return pa.Array.from_buffers(pa.int64(), len(words), [None, pa.py_buffer(words)])


def _strings(values: Sequence[Any]) -> pa.Array:
    """Texts as a string array: joined, encoded once and split by Arrow.

    Encoding and measuring each text in Python took four times as long as `pa.array` (the
    publish of a capture's window builds about ten such columns); this takes about as long.
    """
    text = _SEPARATOR.join(values)
    if text.count(_SEPARATOR) != len(values) - 1:  # a text holds it, or there are none
        return _encoded([value.encode() for value in values])
    return pc.split_pattern(_encoded([text.encode()]), _SEPARATOR).flatten()


def _encoded(texts: Sequence[bytes]) -> pa.Array:
    """UTF-8 texts as a string array: a buffer of them all, and one of where each starts."""
    offsets = array.array("i", accumulate(map(len, texts), initial=0))
    buffers = [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(texts))]
    return pa.Array.from_buffers(pa.string(), len(texts), buffers)
