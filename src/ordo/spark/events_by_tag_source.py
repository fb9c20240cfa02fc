"""`spark.readStream.format("ordo_events_by_tag")`: a tag's events as a Spark stream.

The driver plans each micro-batch with the events-by-tag state machine (planner.py); the
executors read the rows of one segment each (`persistence_id_hash & mask = segment_id` in SQL),
ordered per persistence id, as Arrow record batches. `spark.read` reads what is settled now
as one batch, the same way.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from ordo.errors import ConfigurationError
from ordo.processing import Segment
from ordo.spark.offsets import EventsByTagOffset
from ordo.spark.options import EventsByTagOptions
from ordo.spark.planner import EventsByTagPlanner, pids_of, recorded_journal_id
from ordo.spark.schemas import EVENT_ROW_DDL
from ordo.storage.location import redacted_url
from ordo.time import TimeUUID


class EventsByTagDataSource(DataSource):
    """spark.readStream.format("ordo_events_by_tag").option("journal", url).option("tag", t)."""

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return "ordo_events_by_tag"

    def schema(self) -> str:
        """See schemas.EVENT_ROW_DDL; the options are parsed and checked here.

        Spark asks for the schema on the driver when `load()` defines the DataFrame, for a
        stream as for a batch read, so a bad option (or a missing journal) fails `load()`.
        Checked only by the readers, it failed a stream after `start()` had created the
        checkpoint location, behind PySpark's follow-on UnboundLocalError. (DataSource's
        `__init__` is not to be overridden.) The parsed options, ORDO_* settings resolved,
        are kept: Spark hands this object, pickled, to the readers.
        """
        self._parsed: EventsByTagOptions | None = EventsByTagOptions.from_spark(self.options)
        return EVENT_ROW_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        """A batch read of what is settled now; startingOffsets=latest is refused.

        `latest` is where a stream starts to wait for new events: a batch read from there
        would be empty by definition. Spark's Kafka source refuses it for batch queries too.
        """
        options = self._options()
        if options.starts_at_latest:
            msg = (
                "ordo_events_by_tag: option startingOffsets cannot be latest for a batch read "
                "(spark.read); use earliest or a TimeUUID, or spark.readStream"
            )
            raise ConfigurationError(msg)
        return EventsByTagBatchReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """The micro-batch stream."""
        return EventsByTagStreamReader(self._options())

    def _options(self) -> EventsByTagOptions:
        """The options `schema()` parsed; parsed now if it was not called (a given schema)."""
        parsed = getattr(self, "_parsed", None)
        return parsed if parsed is not None else EventsByTagOptions.from_spark(self.options)


@dataclass(frozen=True, slots=True)
class SegmentPartition(InputPartition):
    """One segment's share of a micro-batch: the rows named for its persistence ids."""

    journal: str
    tag: str
    segment: tuple[int, int]
    lo: str
    hi: str
    pids: dict[str, list[int]]
    bucket_size: str


class EventsByTagStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans on the driver, reads on the executors. Pickled without its planner."""

    def __init__(self, options: EventsByTagOptions) -> None:
        self.options = options
        self._planner: EventsByTagPlanner | None = None
        self._available_until_ns: int | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.options, self._planner, self._available_until_ns = state["options"], None, None

    def prepareForTriggerAvailableNow(self) -> None:
        """availableNow: deliver what is settled now, then report no more data."""
        self._available_until_ns = time.time_ns()
        if self._planner is not None:
            self._planner.cap_at(self._available_until_ns)

    def initialOffset(self) -> dict[str, Any]:
        """Earliest, latest (now minus the consistency delay) or after a given TimeUUID."""
        position = ""
        if self.options.starting_offset is not None:
            position = self.options.starting_offset.to_bytes().hex()
        elif self.options.starts_at_latest:
            settled = (
                time.time_ns() - self.options.query.eventual_consistency_delay.total_seconds() * 1e9
            )
            position = TimeUUID.max_for_epoch_ns(int(settled)).to_bytes().hex()
        offset = EventsByTagOffset(
            position=position, tag=self.options.tag, processor=self.options.processor_name
        )
        return offset.to_json_dict()

    def getDefaultReadLimit(self) -> ReadLimit:
        """maxEventsPerTrigger, when set."""
        limit = self.options.max_events_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """Advance only to what the state machine has delivered (proven complete)."""
        begin = self._checkpointed(start)
        planner = self._planner_after(begin)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return planner.plan(begin, now_ns=time.time_ns(), max_rows=max_rows).to_json_dict()

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """The newest offset delivered by the planner: query progress shows the lag to it."""
        if self._planner is None:
            return None
        latest = EventsByTagOffset(
            position=self._planner.latest_seen,
            tag=self.options.tag,
            processor=self.options.processor_name,
            journal_id=self._planner.journal_id,
        )
        return latest.to_json_dict()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """One partition per segment of the batch `(start, end]`."""
        batch = self._checkpointed(end)
        if end == start or not batch.pids:
            return []
        return _partitions(self.options, batch, [Segment(*pair) for pair in batch.segments])

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The segment's rows of the batch, ordered per persistence id."""
        return read_segment(partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: the rows stay in tag_views."""

    def stop(self) -> None:
        """Close the planner's connections."""
        if self._planner is not None:
            self._planner.close()
            self._planner = None

    def _checkpointed(self, document: dict[str, Any]) -> EventsByTagOffset:
        """An offset Spark hands back (maybe from a checkpoint); another query's is refused.

        So is one planned on another journal: checked here, before a batch is planned from it
        or (a restarted query runs its last planned batch again first) read.
        """
        offset = EventsByTagOffset.from_json_dict(document)
        offset.check_query(self.options.tag, self.options.processor_name)
        if offset.journal_id is not None:
            offset.check_journal(self._journal_id(), url=redacted_url(self.options.journal))
        return offset

    def _journal_id(self) -> str | None:
        """The id of the journal read: the planner's, or read from the journal before it has one."""
        if self._planner is not None:
            return self._planner.journal_id
        return recorded_journal_id(self.options.journal)

    def _planner_after(self, start: EventsByTagOffset) -> EventsByTagPlanner:
        """The planner that continues from `start`.

        Spark may ask from another offset than the last one planned (a recovered checkpoint;
        availableNow asks once from the initial offset to fix its target): the planner is then
        started again from `start`, so that no batch is planned from another one's state.
        """
        if self._planner is not None and self._planner.latest_end != start.position:
            self._planner.close()
            self._planner = None
        if self._planner is None:
            self._planner = EventsByTagPlanner(
                self.options, resume_after=start.position, now_ns=time.time_ns()
            )
            if self._available_until_ns is not None:
                self._planner.cap_at(self._available_until_ns)
        return self._planner


class EventsByTagBatchReader(DataSourceReader):
    """`spark.read`: the events settled now, planned as one batch by the same machine."""

    def __init__(self, options: EventsByTagOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        """One partition per segment."""
        start = EventsByTagOffset(
            position=""
            if self.options.starting_offset is None
            else self.options.starting_offset.to_bytes().hex()
        )
        planner = EventsByTagPlanner(
            self.options, resume_after=start.position, now_ns=time.time_ns()
        )
        planner.cap_at(time.time_ns())  # what is settled now, gaps searched as current() does
        try:
            pids: dict[str, list[int]] = {}
            lo, hi = "", ""
            while True:
                batch = planner.plan(start, now_ns=time.time_ns(), max_rows=None)
                if batch == start:
                    break
                pids.update({p: [pids.get(p, span)[0], span[1]] for p, span in batch.pids.items()})
                lo = min(filter(None, (lo, batch.lo)))
                hi = max(hi, batch.hi)
                start = batch
            segments = planner.segments()
        finally:
            planner.close()
        if not pids:
            return []
        return _partitions(self.options, EventsByTagOffset(lo=lo, hi=hi, pids=pids), segments)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The segment's rows, ordered per persistence id."""
        return read_segment(partition)


def _partitions(
    options: EventsByTagOptions, batch: EventsByTagOffset, segments: list[Segment]
) -> list[InputPartition]:
    return [
        SegmentPartition(
            options.journal,
            options.tag,
            (s.segment_id, s.mask),
            batch.lo,
            batch.hi,
            pids_of(s, batch.pids),
            options.events_by_tag.bucket_size.value,
        )
        for s in segments
    ]


def read_segment(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """Executor side: read the named rows of one segment (imports and opens storage here)."""
    from ordo.spark.reading import read_partition

    if not isinstance(partition, SegmentPartition):
        return  # Spark asks one empty default partition when a batch planned none
    yield from read_partition(partition)
