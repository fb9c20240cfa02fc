"""Executor side of `ordo_events_by_tag`: one segment's rows of a batch, as Arrow.

The rows come packed by the database, pages of 50,000 (ordo.storage.packed_reads), and become
Arrow columns from their buffers (packed_arrow.py); then the named persistence ids' spans are
kept, ordered per persistence id and cut into record batches with Arrow compute kernels and
numpy. No Python object is built per row: that would cost more than the database's own read.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ordo.query import TagViewPage
from ordo.spark.packed_arrow import greatest_key, packed_table
from ordo.storage.open import stores_at
from ordo.storage.packed_reads import TAG_VIEW_PACKING
from ordo.time import GREGORIAN_OFFSET_100NS, BucketSize, TimeUUID
from ordo.time.timeuuid import TIMESTAMP_MASK
from ordo.types import Tag, TimeBucket

if TYPE_CHECKING:
    from ordo.spark.events_by_tag_source import SegmentPartition

PAGE = 5_000
_SIGN_FLIP = 0x8080808080808080
SCHEMA = pa.schema(
    [
        ("offset", pa.string()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("persistence_id", pa.string()),
        ("sequence_nr", pa.int64()),
        ("tag_pid_sequence_nr", pa.int64()),
        ("segment", pa.string()),
        ("tags", pa.string()),
        ("manifest", pa.string()),
        ("serializer", pa.string()),
        ("payload", pa.binary()),
        ("metadata", pa.string()),
    ]
)

READ_PAGE = 50_000
"""Rows per packed read: one query each, so large; a page of ~150-byte rows is ~8 MB."""
_HEX_DIGITS = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_HEX_PLACES = np.r_[0:8, 9:13, 14:18, 19:23, 24:36]
"""Where a UUID text's 32 hex digits go; the 4 other places (8, 13, 18, 23) are dashes."""
_ORDER = [("persistence_id", "ascending"), ("tag_pid_sequence_nr", "ascending")]


def read_partition(partition: SegmentPartition) -> Iterator[pa.RecordBatch]:
    """Read the rows named by the partition, within lo..hi, ordered per persistence id.

    Rows are gathered bucket by bucket in offset order, then stably sorted by (persistence id,
    tag pid sequence nr): rows that tie (a tag_views row written twice) keep their offset order,
    and only the first of them is read. From one bucket the read goes on to the next that holds
    rows of the tag (the store's `next_bucket`, as the planner's TagQuery walks): a batch whose
    lo..hi spans a quiet month of minute buckets would otherwise query each of its 43,200 empty
    minutes.
    """
    if not partition.pids:
        return
    lo, hi = bytes.fromhex(partition.lo), bytes.fromhex(partition.hi)
    segment_id, mask = partition.segment
    sizes = BucketSize(partition.bucket_size)
    named = _spans(partition.pids)
    tables: list[pa.Table] = []
    tag = Tag(partition.tag)
    with stores_at(partition.journal, mode="read") as stores:
        bucket: TimeBucket | None = sizes.key_of(TimeUUID.from_bytes(lo))
        last = sizes.key_of(TimeUUID.from_bytes(hi))
        while bucket is not None:
            after = (int.from_bytes(lo, "big") - 1).to_bytes(16, "big")
            while True:
                request = TagViewPage(
                    tag=tag,
                    time_bucket=bucket,
                    after=after,
                    up_to=hi,
                    limit=READ_PAGE,
                    hash_mask=partition.segment,
                )
                page = stores.packed_pages.read_packed(request, TAG_VIEW_PACKING)
                if page.count:
                    tables.append(_named_rows(packed_table(page, TAG_VIEW_PACKING), named))
                    after = greatest_key(page.keys["timeuuid"])  # offsets are unique per tag
                if page.count < READ_PAGE:
                    break
            if bucket < last:
                bucket = stores.tag_view_reader.next_bucket(tag, after=bucket, up_to=last)
            else:
                bucket = None
    if not tables:
        return
    rows = pa.concat_tables(tables).combine_chunks()  # one take per page, not one per chunk
    order = _first_copies(rows, pc.sort_indices(rows, sort_keys=_ORDER))
    segment = f"{segment_id}/{mask}"
    for start in range(0, len(order), PAGE):
        yield _batch(rows.take(order[start : start + PAGE]), segment)


def _spans(pids: dict[str, list[int]]) -> pa.Table:
    """The named persistence ids with their inclusive [first, last] tag pid sequence nrs."""
    return pa.table(
        {
            "persistence_id": pa.array(pids, pa.string()),
            "first": pa.array([span[0] for span in pids.values()], pa.int64()),
            "last": pa.array([span[1] for span in pids.values()], pa.int64()),
        }
    )


def _named_rows(table: pa.Table, named: pa.Table) -> pa.Table:
    """The rows whose persistence id is named and whose tag pid sequence nr is in its span.

    Each row's span is looked up by its persistence id's index among the named ones (null
    when not named, which drops the row); the filter keeps the rows' order.
    """
    index = pc.index_in(table["persistence_id"], value_set=named["persistence_id"])
    number = table["tag_pid_sequence_nr"]
    first = pc.take(named["first"], index)
    last = pc.take(named["last"], index)
    return table.filter(pc.and_(pc.greater_equal(number, first), pc.less_equal(number, last)))


def _first_copies(rows: pa.Table, order: pa.Array) -> pa.Array:
    """`order` without the rows that repeat the previous row's persistence id and number.

    A tag_views row can be there twice under two offsets (a tag write retried after a crash, a
    reconciliation). The planner delivers the number once and names it in the batch's span, so
    both copies match: reading only the first (the earliest, as ties keep offset order) delivers
    the event once.
    """
    if len(order) < 2:
        return order
    pids = rows["persistence_id"].take(order)
    numbers = rows["tag_pid_sequence_nr"].take(order)
    repeats = pc.and_(pc.equal(pids[1:], pids[:-1]), pc.equal(numbers[1:], numbers[:-1]))
    keep = pa.concat_arrays([pa.array([True]), pc.invert(repeats).combine_chunks()])
    return order.filter(keep)


def _uuid_texts(timestamps: np.ndarray, low_keys: np.ndarray) -> pa.StringArray:
    """The canonical UUID texts of sortable keys, as one Arrow string column.

    The UUID layout is rebuilt for every key at once with numpy, hex-encoded by table lookup
    into a fixed-width (36 characters a row, dashes in place) buffer that Arrow takes as is:
    no Python string per row.
    """
    layout = np.empty((len(timestamps), 2), dtype=">u8")
    layout[:, 0] = (
        ((timestamps & 0xFFFFFFFF) << np.uint64(32))
        | (((timestamps >> np.uint64(32)) & 0xFFFF) << np.uint64(16))
        | (np.uint64(0x1000) | (timestamps >> np.uint64(48)))
    )
    layout[:, 1] = low_keys ^ np.uint64(_SIGN_FLIP)
    octets = layout.view(np.uint8).reshape(-1, 16)
    text = np.full((len(octets), 36), ord("-"), dtype=np.uint8)
    text[:, _HEX_PLACES[0::2]] = _HEX_DIGITS[octets >> 4]
    text[:, _HEX_PLACES[1::2]] = _HEX_DIGITS[octets & 0xF]
    offsets = np.arange(0, 36 * (len(octets) + 1), 36, dtype=np.int32)
    return pa.StringArray.from_buffers(len(octets), pa.py_buffer(offsets), pa.py_buffer(text))


def _keys(timeuuids: pa.ChunkedArray) -> np.ndarray:
    """The 16-byte sortable keys as an (n, 2) array of big-endian uint64, without copies per row.

    Fixed-size binary keys are one contiguous buffer of 16 bytes a key, from the array's offset.
    """
    keys = timeuuids.combine_chunks()
    data = keys.buffers()[1]
    return np.frombuffer(data, dtype=">u8", count=2 * len(keys), offset=16 * keys.offset).reshape(
        -1, 2
    )


def _batch(rows: pa.Table, segment: str) -> pa.RecordBatch:
    """One page of ordered rows in SCHEMA: offset text, timestamp and segment derived."""
    keys = _keys(rows["timeuuid"])
    timestamps = keys[:, 0] & np.uint64(
        TIMESTAMP_MASK
    )  # 100 ns units since 1582, the sortable key's top
    epoch_us = (timestamps.astype(np.int64) - GREGORIAN_OFFSET_100NS) // 10
    columns = {
        "offset": _uuid_texts(timestamps, keys[:, 1]),
        "timestamp": pa.array(epoch_us, pa.timestamp("us", tz="UTC")),
        "persistence_id": rows["persistence_id"],
        "sequence_nr": rows["sequence_nr"],
        "tag_pid_sequence_nr": rows["tag_pid_sequence_nr"],
        "segment": pa.repeat(pa.scalar(segment), rows.num_rows),
        "tags": rows["tags"],
        "manifest": rows["manifest"],
        "serializer": rows["serializer"],
        "payload": rows["payload"],
        "metadata": rows["metadata"],
    }
    table = pa.table(columns).cast(SCHEMA).combine_chunks()
    (batch,) = table.to_batches()
    return batch
