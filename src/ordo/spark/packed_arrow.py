"""Packed pages (ordo.storage.packed_reads) as Arrow tables, built from their buffers.

A packed blob column is a data buffer and byte lengths: the lengths' running sum is an Arrow
offsets buffer. A packed text column is its values with a separator byte between two: the
separators' places give the offsets, and the buffer without them is the data. Either way the
column becomes an Arrow array without making a Python object per row. Keys are fixed-size
binary, numbers int64, and variable-width columns the large (64-bit offset) types, since a
segment's rows can exceed 2 GiB.

Arrays are built with `pa.Array.from_buffers` and read back with `int_values`, not
`pa.array()` and `to_numpy()`: those make pyarrow import pandas (when installed) on first use,
about 0.2 s in the fresh process Spark starts for every streaming query's source, spent before
its first batch is planned.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from ordo.storage.packed_reads import TEXT_SEPARATOR, PackedRows, Packing

_TYPES = {
    Packing.KEY: pa.binary(16),
    Packing.INT: pa.int64(),
    Packing.TEXT: pa.large_string(),
    Packing.NULLABLE_TEXT: pa.large_string(),
    Packing.BLOB: pa.large_binary(),
}


def packed_schema(columns: Sequence[tuple[str, Packing]]) -> pa.Schema:
    """The Arrow schema of packed pages of `columns`."""
    return pa.schema([(name, _TYPES[packing]) for name, packing in columns])


def packed_table(packed: PackedRows, columns: Sequence[tuple[str, Packing]]) -> pa.Table:
    """The page as an Arrow table of `packed_schema(columns)`."""
    count = packed.count
    arrays: list[pa.Array] = []
    for name, packing in columns:
        kind = _TYPES[packing]
        if packing is Packing.KEY:
            keys = pa.py_buffer(packed.keys[name])
            arrays.append(pa.Array.from_buffers(kind, count, [None, keys]))
        elif packing is Packing.INT:
            numbers = pa.py_buffer(_decimals(packed.ints[name], count))
            arrays.append(pa.Array.from_buffers(kind, count, [None, numbers]))
        else:
            if packing is Packing.BLOB:
                data, lengths = packed.blobs[name]
                offsets = np.zeros(count + 1, dtype=np.int64)
                np.cumsum(_decimals(lengths, count), out=offsets[1:])
                buffer = pa.py_buffer(data)
            else:
                buffer, offsets = _separated(packed.texts[name], count)
            validity = _validity(packed.nulls.get(name, ""), count)
            buffers = [validity, pa.py_buffer(offsets), buffer]
            arrays.append(pa.Array.from_buffers(kind, count, buffers))
    return pa.Table.from_arrays(arrays, schema=packed_schema(columns))


def int_values(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The values of a null-free integer column as numpy, a view of its data buffer."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if array.null_count:
        msg = f"integer column holds {array.null_count} nulls"
        raise ValueError(msg)
    dtype = np.dtype(f"int{array.type.bit_width}")
    return np.frombuffer(array.buffers()[1], dtype=dtype)[array.offset : array.offset + len(array)]


def greatest_key(keys: bytes) -> bytes:
    """The greatest of packed 16-byte keys: a page's cursor, not relying on the packing order.

    SQL leaves an aggregate's input order unspecified (ordo.storage.packed_reads packs the rows
    of an ordered subquery, which both backends keep in practice); the keys compare as two
    big-endian words.
    """
    words = np.frombuffer(keys, dtype=">u8").reshape(-1, 2)
    high = words[:, 0]
    tied = np.flatnonzero(high == high.max())
    index = int(tied[np.argmax(words[tied, 1])])
    return keys[16 * index : 16 * index + 16]


def _decimals(joined: str, count: int) -> np.ndarray:
    """Comma-joined decimals as int64, parsed by numpy's text reader (~20 ns a number)."""
    if not count:
        return np.zeros(0, dtype=np.int64)
    numbers = np.fromstring(joined, dtype=np.int64, sep=",")
    if len(numbers) != count:
        msg = f"packed column holds {len(numbers)} numbers for {count} rows"
        raise ValueError(msg)
    return numbers


def _separated(joined: bytes, count: int) -> tuple[pa.Buffer, np.ndarray]:
    """Texts joined with TEXT_SEPARATOR as an Arrow data buffer (without it) and offsets.

    The i-th separator ends value i and has i separators before it, so value i + 1 starts
    at its place minus i in the data without them.
    """
    if not count:
        return pa.py_buffer(b""), np.zeros(1, dtype=np.int64)
    raw = np.frombuffer(joined, dtype=np.uint8)
    is_separator = raw == TEXT_SEPARATOR
    places = np.flatnonzero(is_separator)
    if len(places) != count - 1:
        msg = f"packed texts hold {len(places)} separators for {count} rows"
        raise ValueError(msg)
    offsets = np.empty(count + 1, dtype=np.int64)
    offsets[0] = 0
    offsets[1:count] = places - np.arange(count - 1)
    offsets[count] = len(raw) - (count - 1)
    data = raw[~is_separator] if len(places) else raw
    return pa.py_buffer(data), offsets


def _validity(flags: str, count: int) -> pa.Buffer | None:
    """Arrow's validity bitmap from "1" (NULL) / "0" flags; None when nothing is NULL."""
    if "1" not in flags:
        return None
    valid = np.frombuffer(flags.encode("ascii"), dtype=np.uint8) == ord("0")
    return pa.py_buffer(np.packbits(valid[:count], bitorder="little"))
