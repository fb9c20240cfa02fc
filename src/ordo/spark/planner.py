"""The driver side of `ordo_events_by_tag`: the events-by-tag state machine, on keys only.

It runs the same TagQuery as the library (bucket walking, consistency delay, gap detection and
search, back-tracking, first encounters) over the keys of tag_views, and cuts what it delivers
into micro-batches. A batch is named by the persistence ids and tag pid sequence nr ranges it
delivered (EventsByTagOffset), so executors read exactly those rows, on every replay.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping

from ordo.errors import UnknownProcessorError
from ordo.hashing import stable_hash
from ordo.processing import Segment, initial_segments
from ordo.query import NO_OFFSET, KeyRun, Offset, TagQuery, looking_back
from ordo.query.offset import past_expiry, resumes_in_replay
from ordo.spark.key_runs import KeyRunReader
from ordo.spark.offsets import EventsByTagOffset
from ordo.spark.options import EventsByTagOptions, check_source_bucket_size
from ordo.spark.read_ahead import ReadAheadPages
from ordo.storage.open import existing_stores_at, open_existing_stores, stores_at
from ordo.storage.packed_reads import PackedPageReader
from ordo.storage.sqlite.tag_view_store import SQLiteTagViewStore
from ordo.storage.stores import Stores
from ordo.time import TimeUUID
from ordo.types import PersistenceId

POLLS_PER_PLAN = 100
"""Polls of the state machine per planned batch once it has rows (each reads up to 20 pages)."""


class EventsByTagPlanner:
    """Plans the micro-batches of one streaming query. Lives on the driver; not picklable."""

    def __init__(self, options: EventsByTagOptions, *, resume_after: str, now_ns: int) -> None:
        """Continue after the sortable key `resume_after` (hex; empty: from the start).

        Knowing the positions a projection applied, it resumes back_track_period earlier
        (`looking_back`), to hand on an event that showed up behind the offset since, but
        not before a reset of the projection (`_replayed_up_to`), and not at all when there
        are no positions: a reset cleared them, so they cannot tell the events applied just
        before the offset from late ones, which were then applied a second time. While its
        checkpoint lies within its replays (`resumes_in_replay`), a reset projection takes
        each id's next event after the offset as its first (TagQuery's `after_reset`): it goes
        on past a gap that stopped it. From the
        start, it begins at the tag's expiry horizon, if any (`past_expiry`).

        Pages are summarised per persistence id (KeyRunReader) unless `maxEventsPerTrigger`
        is set: a batch is then cut after a number of rows, which needs them one by one. On
        SQLite a second process reads some of them ahead (ReadAheadPages). The
        journal is read, not upgraded: an older schema is SchemaVersionError (`ordo init`). It
        is opened read-only unless a `processor` option's first tokens are to be written. Its
        id goes into every offset planned, so that a checkpoint is not resumed on another one.
        """
        self.options = options
        self._stores: Stores = open_existing_stores(
            options.journal, mode="read" if options.processor is None else "write"
        )
        try:
            recorded = self._stores.journal.recorded_bucket_size()
            check_source_bucket_size(recorded, options)
            self.journal_id = self._stores.journal.journal_id()
            known = _known_positions(options, self._stores)
            replayed = _replayed_up_to(options, self._stores)
            resume = TimeUUID.from_bytes(bytes.fromhex(resume_after)) if resume_after else None
            start: Offset
            if resume is None:
                start = past_expiry(
                    NO_OFFSET,
                    self._stores.tag_view_reader,
                    options.tag,
                    first_time_bucket_ms=options.events_by_tag.first_time_bucket_ms,
                    bucket_size=options.events_by_tag.bucket_size,
                )
            else:
                start = looking_back(resume, options.query, replayed=replayed) if known else resume
        except BaseException:
            self._stores.close()
            raise
        pages: PackedPageReader = self._stores.packed_pages
        self._read_ahead = ReadAheadPages(pages) if isinstance(pages, SQLiteTagViewStore) else None
        if self._read_ahead is not None:
            pages = self._read_ahead
        self._query = TagQuery(
            self._stores.tag_view_key_reader,
            tag=options.tag,
            offset=start,
            settings=options.query,
            bucket_size=options.events_by_tag.bucket_size,
            first_time_bucket_ms=options.events_by_tag.first_time_bucket_ms,
            now_ns=now_ns,
            is_live=True,
            runs=None if options.max_events_per_trigger is not None else KeyRunReader(pages),
            known=known,
            after_reset=resumes_in_replay(resume, replayed),
        )
        self._backlog: deque[KeyRun] = deque()
        self.latest_end = resume_after
        self.latest_seen = resume_after
        """The newest offset the state machine has delivered (the source's lag reference)."""

    def plan(
        self, start: EventsByTagOffset, *, now_ns: int, max_rows: int | None
    ) -> EventsByTagOffset:
        """The end of the next micro-batch after `start`; `start` itself when nothing is new.

        Polls until it has rows and the state machine waits (or POLLS_PER_PLAN polls), or has
        `max_rows` rows. With nothing found yet it goes on walking empty buckets: `start` would
        say "no new data", which ends an availableNow query. Capped (availableNow, a batch
        read) it also sits out the machine's waits (a gap search) until it has rows or is done.
        """
        polls = 0
        while max_rows is None or len(self._backlog) < max_rows:
            step = self._query.poll(now_ns)
            polls += 1
            self._backlog.extend(step.rows)
            if step.rows:
                newest = max(row.offset_key for row in step.rows).hex()
                self.latest_seen = max(self.latest_seen, newest)
            if step.is_complete:
                break
            if self._backlog and (step.wait_ns > 0 or polls >= POLLS_PER_PLAN):
                break
            if step.wait_ns > 0:
                if self._query.is_live:
                    break  # caught up: nothing new yet
                time.sleep(step.wait_ns / 1e9)
                now_ns = time.time_ns()
        count = len(self._backlog) if max_rows is None else min(max_rows, len(self._backlog))
        taken, position = self._take(count, after=start.position)
        if not taken:
            return start
        pids: dict[str, list[int]] = {}
        for run in taken:
            span = pids.setdefault(run.persistence_id, [run.first_nr, run.tag_pid_sequence_nr])
            span[1] = run.tag_pid_sequence_nr
        end = EventsByTagOffset(
            position=position,
            lo=min(run.first_key for run in taken).hex(),
            hi=max(run.offset_key for run in taken).hex(),
            pids=pids,
            segments=[[s.segment_id, s.mask] for s in self.segments()],
            tag=self.options.tag,
            processor=self.options.processor_name,
            journal_id=self.journal_id,
        )
        self.latest_end = end.position
        return end

    def _take(self, count: int, *, after: str) -> tuple[list[KeyRun], str]:
        """The next `count` runs of the backlog, and any it holds behind them; the position.

        The position (hex) is the newest key taken, or `after` (the batch's start) if newer:
        a query restarted from the batch's end resumes after it, so every run taken must lie
        at or before it and every run left in the backlog after it. The backlog is in the
        order the state machine delivered, which is not the keys' order when a gap search or
        a back-track found events late: those lie behind rows delivered before them. Such a
        run left for the next batch lay behind the position (a restart never delivered it),
        and a position kept before it left the newer runs taken after it (a restart delivered
        them again). So the runs up to the last one behind the position join the batch (a
        capped batch may hold more than `maxEventsPerTrigger`: the late events of one poll,
        which come before its forward rows), until none is left behind it.
        """
        backlog = self._backlog
        taken = [backlog.popleft() for _ in range(count)]
        position = max([bytes.fromhex(after), *(run.offset_key for run in taken)])
        while behind := [i for i, run in enumerate(backlog) if run.first_key <= position]:
            joining = [backlog.popleft() for _ in range(behind[-1] + 1)]
            taken += joining
            position = max([position, *(run.offset_key for run in joining)])
        return taken, position.hex()

    def cap_at(self, now_ns: int) -> None:
        """Plan nothing newer than what is settled at `now_ns` (availableNow's target)."""
        self._query.cap_at(now_ns)

    def segments(self) -> list[Segment]:
        """The input partitions of the next batch: the processor's segments, or `segments`."""
        if self.options.processor is None:
            return initial_segments(self.options.segments)
        tokens = self._stores.tokens
        entries = tokens.initialize(self.options.processor, segment_count=self.options.segments)
        return [entry.segment for entry in entries]

    def close(self) -> None:
        """Release the driver's connections, and its second reader (ReadAheadPages)."""
        if self._read_ahead is not None:
            self._read_ahead.close()
        self._stores.close()


def _known_positions(
    options: EventsByTagOptions, journal: Stores
) -> Mapping[PersistenceId, int] | None:
    """The processed positions of `positionsOf`, when given (a projection's, in its sink).

    With them the state machine expects each id's next event to follow on from what was
    applied (a missing one is a gap, not a first encounter) and starts back_track_period
    before the offset, so that an event that showed up behind it since is handed on. The
    sink is opened as the projection's executors open it (its schema created if new).
    """
    if options.positions_of is None:
        return None
    if options.positions_at is None:
        return journal.tokens.positions(options.positions_of)
    with stores_at(options.positions_at) as sink:
        return sink.tokens.positions(options.positions_of)


def _replayed_up_to(options: EventsByTagOptions, journal: Stores) -> TimeUUID | None:
    """How far the projection of `positionsOf` got before its last reset, if it has tokens.

    The reset cleared the positions of what it applied up to there, and the projection goes
    on from its checkpoint: looking back before that point, the positions it applied since
    (of other ids) would not cover those events, and they would be applied again.
    """
    name = options.positions_of
    if name is None:
        return None
    try:
        entries = journal.tokens.entries(name)
    except UnknownProcessorError:  # a projection whose source does not name it: no tokens
        return None
    reached = [e.replay_until.reached for e in entries if e.replay_until is not None]
    return max((r for r in reached if r is not None), default=None)


def recorded_journal_id(url: str) -> str | None:
    """The id of the journal at `url`, opened as the planner opens it (read-only)."""
    with existing_stores_at(url) as stores:
        return stores.journal.journal_id()


def pids_of(segment: Segment, pids: dict[str, list[int]]) -> dict[str, list[int]]:
    """The part of a batch's persistence ids that a segment reads."""
    return {pid: span for pid, span in pids.items() if segment.matches(stable_hash(pid))}
