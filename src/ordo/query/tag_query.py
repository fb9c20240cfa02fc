"""The events-by-tag state machine of seeds 000 and 001, on row keys, without I/O of its own.

It walks a tag's time buckets, stays `eventual_consistency_delay` behind now, tracks the last
delivered tag pid sequence nr of every persistence id, drops duplicates, holds an event back
when earlier ones of its persistence id are missing and searches for them, back-tracks for
late events, and fails with MissingTaggedEventError rather than skip. The library query feeds
it envelopes; Spark's planner feeds it keys only. The caller drives it with `poll(now_ns)`
and sleeps as the returned Step says; time comes only from that argument.

First encounters: a query from NoOffset expects every persistence id to start at tag pid
sequence nr 1, and a first event above 1 is a gap (until the query has forgotten ids, after
which it cannot tell a returning id from a new one and looks back instead, as Akka does). A
query from an offset takes the first event seen as the first when it is in a past bucket or
`new_persistence_id_scan_timeout` is 0; otherwise it looks back that long for earlier ones,
and then takes the lowest one found (or the event itself) as the first: one missing after it
is a gap.
An id whose last tag pid sequence nr the caller knows (`known`, a tracking processor's
processed positions) is no first encounter: its next event must follow on.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import Generic, cast

from ordo.query.backtracking import BackTrack, BackTrackSchedule
from ordo.query.envelope import KeyRun
from ordo.query.forgetting import Forgetting, cleanup_window
from ordo.query.offset import NoOffset, Offset, refuse_future
from ordo.query.ports import R, RunPage, RunReader, TagViewPage, TagViewReader
from ordo.query.query_arguments import check_tag_query_arguments
from ordo.query.search import MissingSearch, found_rows, missing_error, search_round
from ordo.query.start_scan import needs_start_scan, scan_start
from ordo.query.step import Step
from ordo.query.tag_view_pages import key_at, key_ms, read_pages
from ordo.settings import QuerySettings
from ordo.time import BucketSize, TimeUUID
from ordo.time.duration import nanoseconds
from ordo.types import PersistenceId, Tag, TimeBucket

logger = logging.getLogger(__name__)

PAGES_PER_POLL = 20
"""Pages read by one poll before it returns, so that deliveries stream out."""

RUN_PAGE = 50_000
"""Rows per forward page when a RunReader summarises pages: a page costs one query whatever
its size, and is decided per persistence id, so large pages are cheap."""


class TagQuery(Generic[R]):
    """One query over one tag; one driver polls it (not thread-safe).

    Positions are offsets' sortable keys; `_position` is the last row the forward scan has
    passed (inclusive).
    """

    def __init__(
        self,
        reader: TagViewReader[R],
        *,
        tag: Tag,
        offset: Offset,
        settings: QuerySettings,
        bucket_size: BucketSize,
        first_time_bucket_ms: int,
        now_ns: int,
        is_live: bool,
        runs: RunReader | None = None,
        known: Mapping[PersistenceId, int] | None = None,
        after_reset: bool = False,
    ) -> None:
        """Start at `offset`; `runs`, when given, summarises forward pages.

        NoOffset starts where the bucket holding `first_time_bucket_ms` does (Akka rounds it
        down): started at the instant itself, it skipped that bucket's earlier events.

        With `runs` the query's rows are KeyRuns (its reader returns single-row ones), see
        `_forward_runs`. `known` gives the last tag pid sequence nr the caller has of some
        persistence ids (a processor's processed positions): the query then expects their
        next events to follow on, so it detects a gap a first encounter would have hidden.
        `after_reset`: the caller was reset (`known` lacks what it handled before): an id it
        does not know takes its next event after the offset as its first (`scan_start`).
        """
        check_tag_query_arguments(
            reader,
            tag=tag,
            offset=offset,
            settings=settings,
            bucket_size=bucket_size,
            first_time_bucket_ms=first_time_bucket_ms,
            now_ns=now_ns,
            is_live=is_live,
            runs=runs,
            known=known,
            after_reset=after_reset,
        )
        self.tag = tag
        self._reader = reader
        self._runs = runs
        self._settings = settings
        self._sizes = bucket_size
        self._is_live = is_live
        self._page = settings.page_size
        self._forward_page = settings.page_size if runs is None else RUN_PAGE
        self._delay_ns = nanoseconds(settings.eventual_consistency_delay)
        cleanup = cleanup_window(settings, bucket_size)
        self._schedule = BackTrackSchedule(settings, bucket_size, cleanup=cleanup, now_ns=now_ns)
        if isinstance(offset, NoOffset):
            self._bucket = bucket_size.key(first_time_bucket_ms)
            self._position = key_at(self._bucket * 1_000_000 - 100)
        else:
            refuse_future(offset, now_ns=now_ns)
            self._position = offset.to_bytes()
            self._bucket = bucket_size.key_of(offset)
        self._start = self._position
        self._expects_first_nr_one = isinstance(offset, NoOffset)
        self._forgetting = Forgetting(cleanup, position=self._position)
        self._end = None if is_live else key_at(now_ns - self._delay_ns)
        self._pids: dict[PersistenceId, tuple[int, bytes]] = {
            pid: (nr, self._start) for pid, nr in (known or {}).items()
        }
        self._known = frozenset(known or ())
        self._after_reset = after_reset
        self._search: MissingSearch[R] | None = None
        self._needs_start_scan = not self._expects_first_nr_one and needs_start_scan(
            self._start, self._schedule, now_ns=now_ns, bound_ns=now_ns - self._delay_ns
        )
        self._now_ns = now_ns
        self._accepted: list[R] = []
        """Rows a poll that raised had accepted: the next poll returns them first."""
        self.duplicates = 0
        """Rows dropped because their event was delivered already (for tests and metrics)."""

    def cap_at(self, now_ns: int) -> None:
        """Deliver nothing newer than what is settled at `now_ns`.

        A live query then ends like a current one (Spark's availableNow trigger).
        """
        self._end = key_at(now_ns - self._delay_ns)
        self._is_live = False

    @property
    def is_live(self) -> bool:
        """A live query waits for new events; a current or capped one ends (is_complete)."""
        return self._is_live

    @property
    def position(self) -> TimeUUID:
        """The last offset the forward scan passed (inclusive)."""
        return TimeUUID.from_bytes(self._position)

    def poll(self, now_ns: int) -> Step[R]:
        """Read what can be delivered now.

        Raises MissingTaggedEventError when a gap search reaches gap_timeout. A read that
        fails (StorageUnavailableError) loses nothing: the rows this poll accepted before it,
        which the query's positions count as delivered, come first from the next poll.
        """
        self._now_ns = now_ns
        out, self._accepted = self._accepted, []
        try:
            return self._poll(out)
        except BaseException:
            self._accepted = out
            raise

    def _poll(self, out: list[R]) -> Step[R]:
        if self._needs_start_scan:
            self._scan_start()
        if self._search is not None and not self._continue_search(out):
            return Step(out, False, self._search_wait_ns())
        kind = self._schedule.due(self._now_ns) if self._is_live else None
        if kind is not None:
            is_through = self._back_track(kind, out)
            self._schedule.ran(kind, self._now_ns)
            if not is_through:
                return Step(out, False, 0)  # the first search round runs at once
        has_more = self._forward(out)
        self._forgetting.clean(self._pids, position=self._position)
        if self._search is not None or has_more:
            return Step(out, False, 0)
        return Step(out, not self._is_live, self._idle_wait_ns())

    # -- the forward scan ---------------------------------------------------------------

    def _forward(self, out: list[R]) -> bool:
        """Walk buckets up to the bound; True when more rows wait (page budget spent).

        Pages go on after the last row's offset, which is unique within a tag (TimeUUIDGenerator).
        """
        bound = self._bound()
        for _ in range(PAGES_PER_POLL):
            if self._position >= bound:
                return False
            page = TagViewPage(
                tag=self.tag,
                time_bucket=self._bucket,
                after=self._position,
                up_to=bound,
                limit=self._forward_page,
            )
            count = None if self._runs is None else self._forward_runs(self._runs, page, out)
            if count is None:
                rows = self._reader.read_tag_view(page)
                for row in rows:
                    if not self._offer(row, out):
                        return False
                    self._position = row.offset_key
                count = len(rows)
            if count >= self._forward_page:  # a page of runs may hold more (RunReader)
                continue
            bucket_end = key_at((self._bucket + self._sizes.millis) * 1_000_000 - 100)
            if bound <= bucket_end:
                return False
            last = self._sizes.key(key_ms(bound))
            found = self._reader.next_bucket(self.tag, after=self._bucket, up_to=last)
            self._bucket = last if found is None else found
            self._position = max(self._position, key_at(self._bucket * 1_000_000 - 100))
        return True

    def _forward_runs(self, runs: RunReader, page: TagViewPage, out: list[R]) -> int | None:
        """Deliver the next page as whole runs; None when it must be read row by row.

        A page is taken at once only when every persistence id's run would be accepted row by
        row without a search: it starts right after what was delivered (or is a first
        encounter `_offer` accepts) and has no gap, duplicate or misordered row (the reader
        returns no runs then). Ids are independent of each other, so the result is the one
        the rows give; anything else falls back to the rows, which decide as always.
        """
        summarised: RunPage = runs.read_runs(page)
        if summarised.runs is None or not all(map(self._takes_whole, summarised.runs)):
            return None
        for run in summarised.runs:
            self._pids[run.persistence_id] = (run.tag_pid_sequence_nr, run.offset_key)
            self._position = max(self._position, run.offset_key)  # the page's last row
        out.extend(cast("list[R]", summarised.runs))  # R is KeyRun when a RunReader is given
        return summarised.row_count

    def _takes_whole(self, run: KeyRun) -> bool:
        """Whether `_offer` would accept the run's first row at once (the rest then follow)."""
        known = self._pids.get(run.persistence_id)
        if known is not None:
            return run.first_nr == known[0] + 1
        if self._expects_first_nr_one and not self._forgetting.has_forgotten:
            return run.first_nr == 1
        return self._takes_first_at_once(run.first_nr, self._sizes.key(key_ms(run.first_key)))

    def _takes_first_at_once(self, nr: int, bucket: TimeBucket) -> bool:
        """Whether a first encounter at `nr` in `bucket` is taken at once, with no look back."""
        is_past = bucket < self._sizes.key(self._now_ns // 1_000_000)
        return nr == 1 or is_past or self._settings.new_persistence_id_scan_timeout <= timedelta(0)

    def _bound(self) -> bytes:
        if self._end is not None:
            return self._end
        return key_at(self._now_ns - self._delay_ns)

    def _offer(self, row: R, out: list[R]) -> bool:
        """Deliver, drop or hold back one row; False when it started a search."""
        pid, nr = row.persistence_id, row.tag_pid_sequence_nr
        known = self._pids.get(pid)
        if known is not None:
            if nr == known[0] + 1:
                out.append(row)
                self._pids[pid] = (nr, row.offset_key)
                return True
            if nr <= known[0]:
                self.duplicates += 1
                return True
            logger.warning(
                "gap detected: tag=%s persistence_id=%s expected=%d found=%d",
                self.tag,
                pid,
                known[0] + 1,
                nr,
            )
            return self._begin_search(row, first_missing=known[0] + 1, after=known[1], is_gap=True)
        if self._expects_first_nr_one and not self._forgetting.has_forgotten:
            if nr == 1:
                return self._accept_first(row, out)
            return self._begin_search(row, first_missing=1, after=self._start, is_gap=True)
        row_bucket = self._sizes.key(key_ms(row.offset_key))
        if self._takes_first_at_once(nr, row_bucket):
            return self._accept_first(row, out)
        previous_start = key_at(self._sizes.previous(row_bucket) * 1_000_000 - 100)
        after = max(self._start, previous_start, self._forgetting.floor)
        return self._begin_search(row, first_missing=1, after=after, is_gap=False)

    def _accept_first(self, row: R, out: list[R]) -> bool:
        out.append(row)
        self._pids[row.persistence_id] = (row.tag_pid_sequence_nr, row.offset_key)
        return True

    # -- searching for missing events ---------------------------------------------------

    def _begin_search(self, row: R, *, first_missing: int, after: bytes, is_gap: bool) -> bool:
        timeout = (
            self._settings.gap_timeout if is_gap else self._settings.new_persistence_id_scan_timeout
        )
        search = MissingSearch(
            persistence_id=row.persistence_id,
            held=row,
            first_missing=first_missing,
            after=after,
            up_to=row.offset_key,
            deadline_ns=self._now_ns + nanoseconds(timeout),
            is_gap=is_gap,
        )
        if is_gap and len(search.missing) > self._settings.max_missing_to_search:
            raise missing_error(search, tag=self.tag)
        self._search = search
        return False

    def _continue_search(self, out: list[R]) -> bool:
        """One search round; True when the search is over and the rows are delivered."""
        search = self._search
        assert search is not None  # noqa: S101 - poll() checked
        search_round(search, self._reader, tag=self.tag, bucket_size=self._sizes, page=self._page)
        if not search.is_complete and self._now_ns < search.deadline_ns:
            return False
        if not search.is_complete and search.is_gap:
            raise missing_error(search, tag=self.tag)
        if not search.is_complete:  # a first encounter's look-back timed out
            gap_deadline_ns = self._now_ns + nanoseconds(self._settings.gap_timeout)
            out.extend(search.accept_first_found(deadline_ns=gap_deadline_ns))
            if len(search.missing) > self._settings.max_missing_to_search:
                raise missing_error(search, tag=self.tag)
            if not search.is_complete:
                return False
        out.extend(found_rows(search, tag=self.tag))
        self._pids[search.persistence_id] = (search.held.tag_pid_sequence_nr, search.up_to)
        self._position = max(self._position, search.up_to)
        self._search = None
        return True

    def _search_wait_ns(self) -> int:
        search = self._search
        if search is None:
            return 0
        remaining = max(0, search.deadline_ns - self._now_ns)
        return min(nanoseconds(self._settings.refresh_interval), remaining)

    # -- back-tracking, the start scan and cleanup ----------------------------------------

    def _back_track(self, kind: BackTrack, out: list[R]) -> bool:
        """Re-read from the back-track's reach to the position; False if a search started."""
        reach_ms = self._schedule.reach_ms(kind, position_ms=key_ms(self._position))
        after = max(self._start, key_at(reach_ms * 1_000_000 - 100), self._forgetting.floor)
        bucket = self._sizes.key(key_ms(after))
        while bucket <= self._bucket:
            for rows in read_pages(
                self._reader,
                self.tag,
                TimeBucket(bucket),
                after=after,
                up_to=self._position,
                page=self._page,
            ):
                delivered = len(out)
                for row in rows:
                    if not self._offer(row, out):
                        return False
                if len(out) > delivered:
                    logger.warning(
                        "back-track found late events: tag=%s kind=%s events=%d",
                        self.tag,
                        kind,
                        len(out) - delivered,
                    )
            bucket = self._sizes.next(bucket)
        return True

    def _scan_start(self) -> None:
        """Starting from a recent offset: learn where each persistence id stands first."""
        scan_start(
            self._reader,
            self.tag,
            bucket_size=self._sizes,
            positions=self._pids,
            known=self._known,
            after_reset=self._after_reset,
            start=self._start,
            scanning_period=self._settings.offset_scanning_period,
            up_to=self._bound(),
            page=self._page,
        )
        self._needs_start_scan = False  # not before: a scan whose read failed runs again

    def _idle_wait_ns(self) -> int:
        wait = nanoseconds(self._settings.refresh_interval)
        next_due = self._schedule.next_due_ns()
        if next_due is not None:
            wait = min(wait, max(0, next_due - self._now_ns))
        return wait
