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


def _uuid_text(key: bytes) -> str:
    """The canonical UUID text of a sortable key, without building a TimeUUID (per row)."""
    timestamp = int.from_bytes(key[:8], "big") & _TIMESTAMP_MASK
    low = int.from_bytes(key[8:], "big") ^ _SIGN_FLIP
    text = f"{timestamp & 0xFFFFFFFF:08x}{(timestamp >> 32) & 0xFFFF:04x}"
    text += f"{0x1000 | (timestamp >> 48):04x}{low:016x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def _is_named(row: EventEnvelope, pids: dict[str, list[int]]) -> bool:
    span = pids.get(row.persistence_id)
    return span is not None and span[0] <= row.tag_pid_sequence_nr <= span[1]


def _batch(rows: list[EventEnvelope], segment: str) -> pa.RecordBatch:
    keys = np.frombuffer(b"".join(r.offset_key for r in rows), dtype=">u8").reshape(-1, 2)
    timestamps = keys[:, 0] & _TIMESTAMP_MASK  # 100 ns units since 1582, the sortable key's top
    epoch_us = (timestamps.astype(np.int64) - GREGORIAN_OFFSET_100NS) // 10
    return pa.record_batch(
        [
            pa.array([_uuid_text(r.offset_key) for r in rows], pa.string()),
            pa.array(epoch_us, pa.timestamp("us", tz="UTC")),
            pa.array([r.persistence_id for r in rows], pa.string()),
            pa.array([r.sequence_nr for r in rows], pa.int64()),
            pa.array([r.tag_pid_sequence_nr for r in rows], pa.int64()),
            pa.array([segment] * len(rows), pa.string()),
            pa.array([r.tags_json for r in rows], pa.string()),
            pa.array([r.manifest for r in rows], pa.string()),
            pa.array([r.serializer for r in rows], pa.string()),
            pa.array([r.payload_bytes for r in rows], pa.binary()),
            pa.array([r.metadata_json for r in rows], pa.string()),
        ],
        schema=SCHEMA,
    )
