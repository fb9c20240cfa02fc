"""The token store of tracking processors in SQL, the same statements on every backend.

SqlTokenStore is the claim, split and merge core over its parts, one module each: the token
rows and their transaction (sql_token_rows), segment requests (sql_segment_request, and those
that end with a change: sql_ended_request), processed progress and batches
(sql_processed_progress, sql_batch) and reset (sql_token_reset).
"""

from __future__ import annotations

from collections.abc import Sequence

from ordo.errors import (
    InvalidInputError,
    StorageIntegrityError,
    UnableToClaimTokenError,
    UnknownProcessorError,
)
from ordo.journal import validation
from ordo.processing.connection import SqlConnection
from ordo.processing.control import check_claim_times
from ordo.processing.ports import TokenEntry
from ordo.processing.segment import Segment, initial_segments
from ordo.processing.segment_request import PendingRequest, SegmentAction, UnclaimedChange
from ordo.processing.token import TrackingToken
from ordo.storage.sql_ended_request import SqlEndedRequests
from ordo.storage.sql_processed_progress import SqlProcessedProgress
from ordo.storage.sql_token_reset import SqlTokenReset
from ordo.storage.sql_token_rows import check_segment, replay_point
from ordo.time import TimeUUID


class SqlTokenStore(SqlEndedRequests, SqlProcessedProgress, SqlTokenReset):
    """TokenStore over SQL; backends name their placeholder and row-lock clause.

    Every method is one transaction. Thread-safe (connections are per thread or pooled).
    """

    def initialize(self, processor: str, *, segment_count: int) -> Sequence[TokenEntry]:
        """Create the processor's first segments unless it has some; return its segments."""
        validation.processor_name(processor)
        try:
            with self._write() as conn:
                if not self._entries(conn, processor):
                    for segment in initial_segments(segment_count):
                        self._insert(conn, processor, segment, None, None, None, None)
        except StorageIntegrityError:
            # Another process initialized it between our read and our insert (PostgreSQL's
            # READ COMMITTED does not serialize the two): its segments stand.
            if not self.entries(processor):
                raise
        return self.entries(processor)

    def entries(self, processor: str) -> Sequence[TokenEntry]:
        """Every segment of the processor, by segment id.

        The reads an operator names a processor for check the name as `initialize` does: one
        with a NUL was UnknownProcessorError on SQLite but a StorageError on PostgreSQL, and a
        lone surrogate a UnicodeEncodeError on both.
        """
        validation.processor_name(processor)
        with self._db.connection() as conn:
            found = self._entries(conn, processor)
        if not found:
            msg = f"processor {processor!r} has no tokens (never started, or misspelt)"
            raise UnknownProcessorError(msg)
        return found

    def processors(self) -> Sequence[str]:
        """The names of every processor with tokens."""
        rows = self._fetchall("SELECT DISTINCT processor FROM tokens ORDER BY processor", ())
        return [str(row[0]) for row in rows]

    def claim(
        self, processor: str, segment_id: int, owner: str, *, now_ms: int, claim_timeout_ms: int
    ) -> TokenEntry:
        """Take or renew the claim: unowned, owned by `owner`, or expired."""
        check_segment(processor, segment_id, owner)
        check_claim_times(now_ms, claim_timeout_ms)
        with self._write() as conn:
            claimed = conn.execute(
                self._sql(
                    "UPDATE tokens SET owner = {p}, claimed_at = {p} WHERE processor = {p} "
                    "AND segment_id = {p} AND (owner IS NULL OR owner = {p} OR claimed_at < {p})"
                ),
                (owner, now_ms, processor, segment_id, owner, now_ms - claim_timeout_ms),
            ).rowcount
            entry = self._entry(conn, processor, segment_id)
        if not claimed:
            msg = (
                f"processor {processor!r} segment {segment_id} is claimed by {entry.owner!r}; "
                f"{owner!r} cannot take it before the claim expires"
            )
            raise UnableToClaimTokenError(msg)
        return entry

    def release(
        self, processor: str, segment_id: int, owner: str, *, as_requested: bool = False
    ) -> None:
        """Give the claim up (a no-op unless `owner` holds it).

        With `as_requested` the release pending on the segment goes in the same transaction,
        once the claim is given up, and a request of another action pending there refuses it
        (see TokenStore.release). The claim is given up first: the UPDATE takes the token row's
        lock (PostgreSQL), so a request made meanwhile is read, and one made later waits for the
        commit and finds the release made.
        """
        check_segment(processor, segment_id, owner)
        if not as_requested:
            with self._db.connection() as conn:
                self._give_up(conn, processor, segment_id, owner)
            return
        with self._write() as conn:
            if self._give_up(conn, processor, segment_id, owner):
                self._check_nothing_else_asked(conn, processor, segment_id, SegmentAction.RELEASE)
                self._obey(conn, processor, segment_id, SegmentAction.RELEASE)

    def _give_up(self, conn: SqlConnection, processor: str, segment_id: int, owner: str) -> bool:
        """End `owner`'s claim of the segment; whether it held it."""
        released = conn.execute(
            self._sql(
                "UPDATE tokens SET owner = NULL, claimed_at = NULL "
                "WHERE processor = {p} AND segment_id = {p} AND owner = {p}"
            ),
            (processor, segment_id, owner),
        ).rowcount
        return released > 0

    def split(self, processor: str, segment_id: int, owner: str) -> tuple[Segment, Segment]:
        """Split an owned segment; the new half copies token and replay boundary, unclaimed.

        A split pending on the segment is obeyed: it goes in the same transaction. A request
        of another action pending there refuses the split (see TokenStore.split).
        """
        check_segment(processor, segment_id, owner)
        with self._write() as conn:
            entry = self._owned(conn, processor, segment_id, owner)
            self._check_nothing_else_asked(conn, processor, segment_id, SegmentAction.SPLIT)
            self._obey(conn, processor, segment_id, SegmentAction.SPLIT)
            return self._split_rows(conn, entry)

    def _split_rows(self, conn: SqlConnection, entry: TokenEntry) -> tuple[Segment, Segment]:
        low, high = entry.segment.split()
        conn.execute(
            self._sql("UPDATE tokens SET mask = {p} WHERE processor = {p} AND segment_id = {p}"),
            (low.mask, entry.processor, low.segment_id),
        )
        self._insert(conn, entry.processor, high, entry.token, None, None, entry.replay_until)
        return low, high

    def merge(
        self,
        processor: str,
        segment_id: int,
        owner: str,
        *,
        now_ms: int,
        claim_timeout_ms: int,
    ) -> Segment:
        """Merge an owned segment with its claimable sibling, resuming from the lower token.

        The half that was further ahead processed events the merged segment will see again;
        the merged token keeps that half as a part ahead (TrackingToken.merged), up to which
        the processor checks what was handled (positions or handled events). A split or
        release pending on either half refuses the merge (see TokenStore.merge).
        """
        check_segment(processor, segment_id, owner)
        check_claim_times(now_ms, claim_timeout_ms)
        with self._write() as conn:
            entry, sibling = self._owned_with_sibling(conn, processor, segment_id, owner)
            if not sibling.is_claimable_by(owner, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms):
                msg = (
                    f"processor {processor!r} segment {sibling.segment} is claimed by "
                    f"{sibling.owner!r}: ask its owner to release it first"
                )
                raise UnableToClaimTokenError(msg)
            for half in (entry, sibling):
                self._check_nothing_asked_first(conn, half)
            return self._merge_rows(conn, entry, sibling, owner, now_ms)

    def _merge_rows(
        self,
        conn: SqlConnection,
        entry: TokenEntry,
        sibling: TokenEntry,
        owner: str | None,
        claimed_at: int | None,
    ) -> Segment:
        """Replace the two rows with the merged segment's, claimed by `owner` (or nobody)."""
        processor, segment_id = entry.processor, entry.segment.segment_id
        sibling_id = sibling.segment.segment_id
        merged = entry.segment.merge(sibling.segment)
        token = entry.token.merged(entry.segment, sibling.token, sibling.segment)
        replay = replay_point([entry.replay_until, sibling.replay_until])
        conn.execute(
            self._sql("DELETE FROM tokens WHERE processor = {p} AND segment_id IN ({p}, {p})"),
            (processor, segment_id, sibling_id),
        )
        self._forget_merged_requests(conn, processor, segment_id, sibling_id)
        self._insert(conn, processor, merged, token, owner, claimed_at, replay)
        return merged

    def change_unclaimed(
        self,
        processor: str,
        segment_id: int,
        action: SegmentAction,
        *,
        now_ms: int,
        claim_timeout_ms: int,
    ) -> UnclaimedChange:
        """Split, merge or release segments nobody holds, for an operator: one transaction.

        Not a claim for the operator, the change and a release, each its own transaction: a
        step that failed after the claim (storage lost between the steps) would leave the
        segment claimed by nobody at work until the claim timeout. A merge locks both rows in
        the order `merge` does (see TokenStore.change_unclaimed).
        """
        check_segment(processor, segment_id)
        check_claim_times(now_ms, claim_timeout_ms)
        if action not in _CHANGED_UNCLAIMED:
            msg = f"action must be a split, merge or release, got {action!r:.80}"
            raise InvalidInputError(msg)
        with self._write() as conn:
            segments: tuple[Segment, ...]
            if action is SegmentAction.MERGE:
                entry, sibling = self._owned_with_sibling(conn, processor, segment_id, None)
                replaced = self._free(conn, (entry, sibling), now_ms, claim_timeout_ms)
                segments = (self._merge_rows(conn, entry, sibling, None, None),)
            else:
                entry = self._entry(conn, processor, segment_id)
                replaced = self._free(conn, (entry,), now_ms, claim_timeout_ms)
                is_split = action is SegmentAction.SPLIT
                segments = self._split_rows(conn, entry) if is_split else (entry.segment,)
        return UnclaimedChange(segments=segments, replaced=replaced)

    def _free(
        self, conn: SqlConnection, entries: tuple[TokenEntry, ...], now_ms: int, timeout_ms: int
    ) -> tuple[PendingRequest, ...]:
        """Refuse held segments, end expired claims; the pending requests replaced on them."""
        for entry in entries:
            if entry.is_held(now_ms=now_ms, claim_timeout_ms=timeout_ms):
                msg = (
                    f"processor {entry.processor!r} segment {entry.segment} is claimed by "
                    f"{entry.owner!r}: ask its owner instead"
                )
                raise UnableToClaimTokenError(msg)
            conn.execute(
                self._sql(
                    "UPDATE tokens SET owner = NULL, claimed_at = NULL "
                    "WHERE processor = {p} AND segment_id = {p}"
                ),
                (entry.processor, entry.segment.segment_id),
            )
        return self._replace_pending(conn, entries[0].processor, tuple(e.segment for e in entries))

    def hand_over(
        self,
        processor: str,
        segment_id: int,
        owner: str,
        *,
        to: str,
        now_ms: int,
        claim_timeout_ms: int,
    ) -> bool:
        """Move an owned claim to `to`, fresh, while `to`'s merge of the sibling waits for it.

        The owner reads the hand-over request at one check and hands over after it; the merge
        can end in between (an operator's release or split, `to`'s claim lapsing, `to`
        stopping), and the segment would then sit claimed by an owner that merges nothing until
        the claim timeout. So the checks of TokenStore.hand_over (_merge_awaits) and the move are
        one transaction, under both token rows' locks (PostgreSQL), taken in the order `merge`
        takes them. The hand-over to `to` pending on the segment ends with this one, made or
        skipped: the owner obeyed it (a move that fails leaves it pending for a retry). Left
        pending on a segment `to` holds, it could send the segment to `to` again from its next
        owner, after `to` has stopped.
        """
        check_segment(processor, segment_id, owner)
        validation.owner_name(to, name="to")
        check_claim_times(now_ms, claim_timeout_ms)
        with self._write() as conn:
            entry, sibling = self._owned_and_sibling(conn, processor, segment_id, owner)
            awaits = self._merge_awaits(
                conn, entry, sibling, to, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms
            )
            if awaits:
                conn.execute(
                    self._sql(
                        "UPDATE tokens SET owner = {p}, claimed_at = {p} "
                        "WHERE processor = {p} AND segment_id = {p}"
                    ),
                    (to, now_ms, processor, segment_id),
                )
            self._forget_hand_over_to(conn, processor, segment_id, to)
        return awaits

    def advance_unclaimed(
        self, processor: str, offset: TimeUUID, *, now_ms: int, claim_timeout_ms: int
    ) -> None:
        """Move the token of every unclaimed segment forward to `offset`, which was applied.

        For a reader that holds no claims (a Spark projection dedupes by its positions and
        resumes from its own checkpoint, so it never needs a token): storing one lets status
        and cleanup judge it by what it applied, as they judge a tracking processor. The
        caller has applied every event of every segment up to `offset`. A token moves only
        forward (a replayed batch reports an older offset), keeping the merged parts ahead it
        has not reached; a segment under a live claim keeps its token, which its owner (a
        tracking processor of the same name, an operator's change in progress) moves itself.

        A claim that expired is free, as `claim` treats it: such a segment (its owner crashed
        without releasing it) would otherwise keep its token for ever, and status and cleanup
        would judge the reader by it. Moving its token also ends the expired claim, as taking it
        over would: an owner that was only stalled then finds its claim lost when it resumes, and
        its batch is rolled back instead of storing its older token over the new one.

        One transaction: the processor's rows are read locked (a split or merge waits), and
        only the tokens that move are written.
        """
        validation.processor_name(processor)
        check_claim_times(now_ms, claim_timeout_ms)
        if not isinstance(offset, TimeUUID):
            msg = f"offset must be a TimeUUID, got {type(offset).__name__}: {offset!r:.80}"
            raise InvalidInputError(msg)
        with self._write() as conn:
            for entry in self._entries(conn, processor, lock=True):
                if entry.is_held(
                    now_ms=now_ms, claim_timeout_ms=claim_timeout_ms
                ) or not entry.token.is_before(TrackingToken(offset)):
                    continue
                conn.execute(
                    self._sql(
                        "UPDATE tokens SET token = {p}, owner = NULL, claimed_at = NULL "
                        "WHERE processor = {p} AND segment_id = {p}"
                    ),
                    (
                        entry.token.advanced_to(offset).to_json(),
                        processor,
                        entry.segment.segment_id,
                    ),
                )


_CHANGED_UNCLAIMED = frozenset({SegmentAction.SPLIT, SegmentAction.MERGE, SegmentAction.RELEASE})
