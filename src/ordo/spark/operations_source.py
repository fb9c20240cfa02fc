"""Batch sources of keys for the operations jobs: `ordo_journal_keys`, `ordo_tag_view_keys`.

Spark has no JDBC driver here, so the rebuild and verify jobs read SQLite and PostgreSQL
through these Python data sources. They read keys only (no payloads): the journal split into
persistence id ranges (its primary key), tag_views split into (tag, bucket range) pieces (its
primary key), each piece keyset-paged and yielded as Arrow record batches. Options: `journal`
(the URL) and `partitions` (how many pieces to aim for, default 4).

The readers hold only the options (picklable); each read() opens its own connections.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from ordo.arguments import integer_text
from ordo.documents import unknown_names_message
from ordo.errors import ConfigurationError
from ordo.settings.operations import MAX_SPARK_KEY_PARTITIONS, SPARK_KEY_PARTITIONS
from ordo.storage.open import stores_at
from ordo.time import GREGORIAN_OFFSET_100NS
from ordo.time.timeuuid import TIMESTAMP_MASK
from ordo.types import PersistenceId, Tag, TimeBucket

JOURNAL_KEYS_DDL = (
    "persistence_id STRING, sequence_nr BIGINT, epoch_ms BIGINT, timeuuid BINARY, tags STRING"
)
"""One journal event: `epoch_ms` is its TimeUUID's time (what buckets are keyed on), `tags`
the stored JSON object tag -> tag pid sequence nr."""
TAG_VIEW_KEYS_DDL = (
    "tag STRING, timebucket BIGINT, timeuuid BINARY, persistence_id STRING, "
    "tag_pid_sequence_nr BIGINT, sequence_nr BIGINT"
)
"""The key of one tag_views row, with the sequence nr of the event it names."""
PAGE = 10_000
_OPTIONS = ("journal", "partitions")


@dataclass(frozen=True, slots=True)
class KeysOptions:
    """The parsed options of both sources (picklable)."""

    journal: str
    partitions: int

    @classmethod
    def from_spark(cls, source: str, options: Mapping[str, str]) -> KeysOptions:
        """Parse Spark's case-insensitive string options of `source` (its format name).

        Unknown options are refused with the closest valid one, and `partitions` must be in
        1..MAX_SPARK_KEY_PARTITIONS, so that 0 is not read as 1, nor a billion pieces run as a
        billion queries.
        """
        given = {key.lower(): value for key, value in options.items()}
        unknown = [key for key in options if key.lower() not in _OPTIONS]
        if unknown:
            raise ConfigurationError(
                unknown_names_message(unknown, _OPTIONS, where=source, noun="option", suggest=True)
            )
        if not given.get("journal"):
            msg = f"{source} needs the option journal (a journal URL)"
            raise ConfigurationError(msg)
        text = given.get("partitions", str(SPARK_KEY_PARTITIONS))
        try:
            partitions = integer_text(text)
        except ValueError:
            partitions = 0
        if not 1 <= partitions <= MAX_SPARK_KEY_PARTITIONS:
            msg = (
                f"{source}: option partitions must be an integer in "
                f"1..{MAX_SPARK_KEY_PARTITIONS}, got {text!r}"
            )
            raise ConfigurationError(msg)
        return cls(journal=given["journal"], partitions=partitions)


@dataclass(frozen=True, slots=True)
class PidRange(InputPartition):
    """Journal events with after < persistence_id <= up_to (None: unbounded)."""

    after: str | None
    up_to: str | None


@dataclass(frozen=True, slots=True)
class TagBuckets(InputPartition):
    """Rows of one tag in buckets first..last (inclusive)."""

    tag: str
    first: int
    last: int


class JournalKeysDataSource(DataSource):
    """spark.read.format("ordo_journal_keys").option("journal", url): every event's keys."""

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return "ordo_journal_keys"

    def schema(self) -> str:
        """See JOURNAL_KEYS_DDL."""
        return JOURNAL_KEYS_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        """A batch read of the whole journal."""
        return JournalKeysReader(KeysOptions.from_spark(self.name(), self.options))


class TagViewKeysDataSource(DataSource):
    """spark.read.format("ordo_tag_view_keys").option("journal", url): every row's key."""

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return "ordo_tag_view_keys"

    def schema(self) -> str:
        """See TAG_VIEW_KEYS_DDL."""
        return TAG_VIEW_KEYS_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        """A batch read of all of tag_views."""
        return TagViewKeysReader(KeysOptions.from_spark(self.name(), self.options))


class JournalKeysReader(DataSourceReader):
    """Splits the journal at persistence id quantiles; reads each range by primary key."""

    def __init__(self, options: KeysOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        """One range per quantile of all_persistence_ids (at least one)."""
        with stores_at(self.options.journal, mode="read") as stores:
            bounds: list[str | None] = [
                *stores.operations.persistence_id_boundaries(self.options.partitions)
            ]
        edges = [None, *bounds, None]
        return [PidRange(after=lo, up_to=hi) for lo, hi in itertools.pairwise(edges)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The range's events, a page per record batch."""
        if not isinstance(partition, PidRange):
            msg = f"not a journal keys partition: {partition!r}"
            raise TypeError(msg)
        with stores_at(self.options.journal, mode="read") as stores:
            for page in stores.operations.message_keys(
                after=None if partition.after is None else PersistenceId(partition.after),
                up_to=None if partition.up_to is None else PersistenceId(partition.up_to),
                page_size=PAGE,
            ):
                pid, seq, uuid, tags = zip(*page, strict=True)
                yield pa.record_batch(
                    [
                        pa.array(pid, pa.string()),
                        pa.array(seq, pa.int64()),
                        pa.array(_epoch_ms(uuid), pa.int64()),
                        pa.array(uuid, pa.binary()),
                        pa.array(tags, pa.string()),
                    ],
                    names=["persistence_id", "sequence_nr", "epoch_ms", "timeuuid", "tags"],
                )


class TagViewKeysReader(DataSourceReader):
    """Splits tag_views by tag and bucket range; reads each piece by primary key."""

    def __init__(self, options: KeysOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        """Each tag's bucket span cut into pieces in proportion to its rows (a scan)."""
        with stores_at(self.options.journal, mode="read") as stores:
            ranges = stores.operations.tag_ranges()
        total = sum(r.rows for r in ranges) or 1
        pieces: list[InputPartition] = []
        for r in ranges:
            count = max(1, round(self.options.partitions * r.rows / total))
            span = r.last_bucket - r.first_bucket + 1
            step = max(1, math.ceil(span / count))
            for first in range(r.first_bucket, r.last_bucket + 1, step):
                pieces.append(TagBuckets(tag=r.tag, first=first, last=first + step - 1))
        return pieces or [TagBuckets(tag="", first=0, last=-1)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The piece's row keys, a page per record batch."""
        if not isinstance(partition, TagBuckets):
            msg = f"not a tag view keys partition: {partition!r}"
            raise TypeError(msg)
        if partition.last < partition.first:
            return
        with stores_at(self.options.journal, mode="read") as stores:
            for page in stores.operations.tag_view_keys(
                Tag(partition.tag),
                first_bucket=TimeBucket(partition.first),
                last_bucket=TimeBucket(partition.last),
                page_size=PAGE,
            ):
                tag, bucket, uuid, pid, number, seq = zip(*page, strict=True)
                yield pa.record_batch(
                    [
                        pa.array(tag, pa.string()),
                        pa.array(bucket, pa.int64()),
                        pa.array(uuid, pa.binary()),
                        pa.array(pid, pa.string()),
                        pa.array(number, pa.int64()),
                        pa.array(seq, pa.int64()),
                    ],
                    names=[
                        "tag",
                        "timebucket",
                        "timeuuid",
                        "persistence_id",
                        "tag_pid_sequence_nr",
                        "sequence_nr",
                    ],
                )


def _epoch_ms(uuids: Sequence[bytes]) -> np.ndarray:
    """Epoch milliseconds of stored TimeUUIDs, for a whole page at once (floored, as buckets)."""
    keys = np.frombuffer(b"".join(uuids), dtype=">u8").reshape(-1, 2)
    timestamps = (keys[:, 0] & np.uint64(TIMESTAMP_MASK)).astype(np.int64)
    return (timestamps - GREGORIAN_OFFSET_100NS) // 10_000
