"""Executor side of `ordo_events_by_tag`: one segment's rows of a batch, as Arrow."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ordo.query import EventEnvelope
from ordo.storage.open import stores_at
from ordo.time import GREGORIAN_OFFSET_100NS, BucketSize, TimeUUID
from ordo.types import Tag, TimeBucket

if TYPE_CHECKING:
    from ordo.spark.events_by_tag_source import SegmentPartition

PAGE = 5_000
_TIMESTAMP_MASK = (1 << 60) - 1
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


def read_partition(partition: SegmentPartition) -> Iterator[pa.RecordBatch]:
    """Read the rows named by the partition, within lo..hi, ordered per persistence id."""
    if not partition.pids:
        return
    lo, hi = bytes.fromhex(partition.lo), bytes.fromhex(partition.hi)
    after = (int.from_bytes(lo, "big") - 1).to_bytes(16, "big")
    sizes = BucketSize(partition.bucket_size)
    rows: list[EventEnvelope] = []
    with stores_at(partition.journal, create_schema=False) as stores:
        reader = stores.tag_view_reader
        bucket = sizes.key(TimeUUID.from_bytes(lo).epoch_ms)
        last = sizes.key(TimeUUID.from_bytes(hi).epoch_ms)
        while bucket <= last:
            cursor = after
            while True:
                page = reader.read_tag_view(
                    Tag(partition.tag),
                    TimeBucket(bucket),
                    after=cursor,
                    up_to=hi,
                    limit=PAGE,
                    hash_mask=partition.segment,
                )
                rows.extend(r for r in page if _is_named(r, partition.pids))
                if len(page) < PAGE:
                    break
                cursor = page[-1].offset_key
            bucket = sizes.next(bucket)
    rows.sort(key=lambda r: (r.persistence_id, r.tag_pid_sequence_nr))
    segment = f"{partition.segment[0]}/{partition.segment[1]}"
    for start in range(0, len(rows), PAGE):
        yield _batch(rows[start : start + PAGE], segment)


def _uuid_texts(timestamps: np.ndarray, low_keys: np.ndarray) -> list[str]:
    """The canonical UUID texts of sortable keys.

    The UUID layout is rebuilt for every key at once with numpy, hex-encoded as one string, then
    cut per row: the only per-row Python left.
    """
    layout = np.empty((len(timestamps), 2), dtype=">u8")
    layout[:, 0] = (
        ((timestamps & 0xFFFFFFFF) << np.uint64(32))
        | (((timestamps >> np.uint64(32)) & 0xFFFF) << np.uint64(16))
        | (np.uint64(0x1000) | (timestamps >> np.uint64(48)))
    )
    layout[:, 1] = low_keys ^ np.uint64(_SIGN_FLIP)
    text = layout.tobytes().hex()
    return [
        f"{text[i : i + 8]}-{text[i + 8 : i + 12]}-{text[i + 12 : i + 16]}-"
        f"{text[i + 16 : i + 20]}-{text[i + 20 : i + 32]}"
        for i in range(0, len(text), 32)
    ]


def _is_named(row: EventEnvelope, pids: dict[str, list[int]]) -> bool:
    span = pids.get(row.persistence_id)
    return span is not None and span[0] <= row.tag_pid_sequence_nr <= span[1]


def _batch(rows: list[EventEnvelope], segment: str) -> pa.RecordBatch:
    # Columns in one C-level transpose; EventEnvelope's field order is the stored column order.
    offset, pid, tag_pid_nr, sequence_nr, serializer, manifest, payload, metadata, tags = zip(
        *rows, strict=True
    )
    keys = np.frombuffer(b"".join(offset), dtype=">u8").reshape(-1, 2)
    timestamps = keys[:, 0] & _TIMESTAMP_MASK  # 100 ns units since 1582, the sortable key's top
    epoch_us = (timestamps.astype(np.int64) - GREGORIAN_OFFSET_100NS) // 10
    return pa.record_batch(
        [
            pa.array(_uuid_texts(timestamps, keys[:, 1]), pa.string()),
            pa.array(epoch_us, pa.timestamp("us", tz="UTC")),
            pa.array(pid, pa.string()),
            pa.array(sequence_nr, pa.int64()),
            pa.array(tag_pid_nr, pa.int64()),
            pa.array([segment] * len(rows), pa.string()),
            pa.array(tags, pa.string()),
            pa.array(manifest, pa.string()),
            pa.array(serializer, pa.string()),
            pa.array(payload, pa.binary()),
            pa.array(metadata, pa.string()),
        ],
        schema=SCHEMA,
    )
