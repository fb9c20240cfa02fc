"""The token store of tracking processors in SQL, the same statements on every backend."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from typing import ClassVar

from ordo.errors import (
    InvalidInputError,
    InvalidSegmentOperationError,
    PendingHandOverError,
    PendingMergeError,
    StorageIntegrityError,
    StorageUnavailableError,
    UnableToClaimTokenError,
    UnknownProcessorError,
    UnknownSegmentError,
)
from ordo.journal import validation
from ordo.processing.control import check_claim_times, check_token
from ordo.processing.ports import (
    DeadLetter,
    PendingRequest,
    SegmentAction,
    SegmentRequest,
    TokenEntry,
)
from ordo.processing.segment import Segment, initial_segments
from ordo.processing.token import TrackingToken
from ordo.storage.sql_store import SqlConnection, SqlStore
from ordo.time import TimeUUID
from ordo.types import PersistenceId

_ENTRY = "segment_id, mask, token, owner, claimed_at, replay_until"
_POSITIONS_PER_STATEMENT = 1_000
"""Rows of one positions upsert: 3,000 parameters, within SQLite's and PostgreSQL's limits."""
_PROGRESS_TABLES = ("processed_positions", "handled_batches")
"""What a processor handled, besides its tokens: a reset clears both."""
OWN_IDLE_LIMIT_MS = 10_000
"""How long a transaction running only the store's own statements may sit idle: they follow
each other at once, so a transaction idle this long belongs to a stalled process."""


class SqlTokenStore(SqlStore):
    """TokenStore over SQL; backends name their placeholder and row-lock clause.

    Every method is one transaction. Thread-safe (connections are per thread or pooled).
    """

    LOCK_ROWS: ClassVar[str] = ""
    """Appended to SELECTs that must lock the rows they read (PostgreSQL: FOR UPDATE)."""

    @contextmanager
    def _write(self, idle_limit_ms: int | None = OWN_IDLE_LIMIT_MS) -> Iterator[SqlConnection]:
        """One write transaction that a stalled process cannot keep open past `idle_limit_ms`.

        A process stopped in the middle of a transaction (SIGSTOP, a paused VM, a debugger)
        holds its row locks: on PostgreSQL the token row and the positions of its batch, so
        the segment's next owner would wait on them after the claim expired. The server ends
        such a session instead (_limit_idle); the stalled batch then fails at its next
        statement and is rolled back, as if its claim had been lost.
        """
        with self._db.write_transaction() as conn:
            if idle_limit_ms is not None:
                self._limit_idle(conn, idle_limit_ms)
            yield conn

    def _limit_idle(self, conn: SqlConnection, idle_limit_ms: int) -> None:
        """End the session when the transaction sits idle that long.

        A no-op here: on SQLite a stalled writer holds the database's write lock, which other
        writers wait for only up to their busy timeout, and no row locks.
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

    def processors_without_tokens(self) -> Mapping[str, int]:
        """The processors with positions or handled batches but no tokens, by name.

        Each with its number of positions (persistence ids): what a reset would clear where a
        Spark projection keeps only those, its own sink, which `processors()` does not list.
        """
        rows = self._fetchall(
            "SELECT p.processor, (SELECT COUNT(*) FROM processed_positions AS c "
            "WHERE c.processor = p.processor) FROM (SELECT processor FROM processed_positions "
            "UNION SELECT processor FROM handled_batches) AS p WHERE NOT EXISTS "
            "(SELECT 1 FROM tokens AS t WHERE t.processor = p.processor) ORDER BY p.processor",
            (),
        )
        return {str(row[0]): int(str(row[1])) for row in rows}

    def claim(
        self, processor: str, segment_id: int, owner: str, *, now_ms: int, claim_timeout_ms: int
    ) -> TokenEntry:
        """Take or renew the claim: unowned, owned by `owner`, or expired."""
        _check_segment(processor, segment_id, owner)
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

    def release(self, processor: str, segment_id: int, owner: str) -> None:
        """Give the claim up (a no-op unless `owner` holds it)."""
        _check_segment(processor, segment_id, owner)
        with self._db.connection() as conn:
            conn.execute(
                self._sql(
                    "UPDATE tokens SET owner = NULL, claimed_at = NULL "
                    "WHERE processor = {p} AND segment_id = {p} AND owner = {p}"
                ),
                (processor, segment_id, owner),
            )

    def split(self, processor: str, segment_id: int, owner: str) -> tuple[Segment, Segment]:
        """Split an owned segment; the new half copies token and replay boundary, unclaimed."""
        _check_segment(processor, segment_id, owner)
        with self._write() as conn:
            entry = self._owned(conn, processor, segment_id, owner)
            low, high = entry.segment.split()
            conn.execute(
                self._sql(
                    "UPDATE tokens SET mask = {p} WHERE processor = {p} AND segment_id = {p}"
                ),
                (low.mask, processor, segment_id),
            )
            self._insert(conn, processor, high, entry.token, None, None, entry.replay_until)
        return low, high

    def merge(
        self, processor: str, segment_id: int, owner: str, *, now_ms: int, claim_timeout_ms: int
    ) -> Segment:
        """Merge an owned segment with its claimable sibling, resuming from the lower token.

        The half that was further ahead processed events the merged segment will see again;
        the merged token keeps that half as a part ahead (TrackingToken.merged), up to which
        the processor checks what was handled (positions or handled events).
        """
        _check_segment(processor, segment_id, owner)
        check_claim_times(now_ms, claim_timeout_ms)
        with self._write() as conn:
            entry = self._owned(conn, processor, segment_id, owner)
            sibling_id = entry.segment.mergeable_segment_id()
            sibling = self._find(conn, processor, sibling_id)
            if sibling is None or sibling_id == segment_id:
                msg = (
                    f"processor {processor!r} segment {entry.segment} has no sibling to merge "
                    f"with (segment {sibling_id} is split further or does not exist)"
                )
                raise InvalidSegmentOperationError(msg)
            merged = entry.segment.merge(sibling.segment)
            if not sibling.is_claimable_by(owner, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms):
                msg = (
                    f"processor {processor!r} segment {sibling.segment} is claimed by "
                    f"{sibling.owner!r}: ask its owner to release it first"
                )
                raise UnableToClaimTokenError(msg)
            token = entry.token.merged(entry.segment, sibling.token, sibling.segment)
            replay = _replay_point([entry.replay_until, sibling.replay_until])
            conn.execute(
                self._sql("DELETE FROM tokens WHERE processor = {p} AND segment_id IN ({p}, {p})"),
                (processor, segment_id, sibling_id),
            )
            # Requests to the merged-away segment must not reach a segment a later split makes;
            # a hand-over of the other half was asked for a merge of the two, which is done.
            conn.execute(
                self._sql(
                    "DELETE FROM segment_requests WHERE processor = {p} AND (segment_id = {p} "
                    "OR (segment_id = {p} AND action = {p}))"
                ),
                (
                    processor,
                    max(segment_id, sibling_id),
                    merged.segment_id,
                    SegmentAction.HAND_OVER.value,
                ),
            )
            self._insert(conn, processor, merged, token, owner, now_ms, replay)
        return merged

    def request(
        self,
        processor: str,
        segment_id: int,
        request: SegmentRequest,
        *,
        now_ms: int,
        replace_hand_over: bool = False,
    ) -> None:
        """Ask the segment's owner to act (the latest request wins, but for a hand-over).

        A pending hand-over is what a merge of the segment's sibling waits for: another
        request replaces it only with `replace_hand_over` (PendingHandOverError otherwise),
        as an operator's release replaced it silently and held the merge up. The same request
        again is no replacement. A pending merge that another request replaces ends, and so
        does the hand-over of the sibling it asked for (withdrawn): the sibling's owner handed
        its segment over to an owner that was no longer merging. A hand-over of the lower of
        two siblings whose own merge is pending is refused (PendingMergeError): both owners
        were merging the pair, and each handed its segment to the other. The checks and the
        writes are one transaction, under the segment's token row lock (PostgreSQL), which
        every request takes first.

        A hand-over must name the owner to hand over to: its owner ignored one that named none.
        A `now_ms` of "x" was stored by SQLite, and every later `pending_requests` (the status
        of the processor) failed reading it back.
        """
        _check_segment(processor, segment_id)
        _check_request(request)
        validation.integer(now_ms, name="now_ms")
        with self._write() as conn:
            segment = self._entry(conn, processor, segment_id).segment
            pending = self._pending(conn, processor, segment_id)
            if (
                pending is not None
                and pending.action is SegmentAction.HAND_OVER
                and pending != request
                and not replace_hand_over
            ):
                raise PendingHandOverError(
                    processor=processor,
                    segment_id=segment_id,
                    target_owner=pending.target_owner,
                    request=request.describe(),
                )
            is_merging = pending is not None and pending.action is SegmentAction.MERGE
            if (
                is_merging
                and request.action is SegmentAction.HAND_OVER
                and segment_id < segment.mergeable_segment_id()
            ):
                raise PendingMergeError(
                    processor=processor, segment_id=segment_id, target_owner=request.target_owner
                )
            conn.execute(
                self._sql(
                    "INSERT INTO segment_requests (processor, segment_id, action, target_owner, "
                    "requested_at) VALUES ({p}, {p}, {p}, {p}, {p}) "
                    "ON CONFLICT (processor, segment_id) DO UPDATE SET action = excluded.action, "
                    "target_owner = excluded.target_owner, requested_at = excluded.requested_at"
                ),
                (processor, segment_id, request.action.value, request.target_owner, now_ms),
            )
            if is_merging and request != pending:
                self._withdraw_hand_over(conn, processor, segment)

    def _withdraw_hand_over(self, conn: SqlConnection, processor: str, segment: Segment) -> None:
        """Delete the pending hand-over of the segment's sibling, which its merge asked for.

        Only of the sibling as it was (the same mask): once split, its half's hand-over is for
        the merge of that half's own sibling. The sibling's token row is not locked: the
        sibling's owner merging locks the two rows the other way round. The root has no
        sibling (its "sibling" id is its own).
        """
        if segment.is_root:
            return
        conn.execute(
            self._sql(
                "DELETE FROM segment_requests WHERE processor = {p} AND segment_id = {p} "
                "AND action = {p} AND EXISTS (SELECT 1 FROM tokens WHERE processor = {p} "
                "AND segment_id = {p} AND mask = {p})"
            ),
            (
                processor,
                segment.mergeable_segment_id(),
                SegmentAction.HAND_OVER.value,
                processor,
                segment.mergeable_segment_id(),
                segment.mask,
            ),
        )

    def take_request(self, processor: str, segment_id: int) -> SegmentRequest | None:
        """Remove and return the pending request for the segment, if any.

        One DELETE ... RETURNING: a read and then a delete lost a request that `request()`
        stored in between (PostgreSQL, READ COMMITTED): it was deleted unseen.
        """
        _check_segment(processor, segment_id)
        with self._write() as conn:
            row = conn.execute(
                self._sql(
                    "DELETE FROM segment_requests WHERE processor = {p} AND segment_id = {p} "
                    "RETURNING action, target_owner"
                ),
                (processor, segment_id),
            ).fetchone()
        return None if row is None else _request(row[0], row[1])

    def pending_requests(self, processor: str) -> Sequence[PendingRequest]:
        """The requests no owner has taken yet, by segment id."""
        validation.processor_name(processor)
        rows = self._fetchall(
            "SELECT segment_id, action, target_owner, requested_at FROM segment_requests "
            "WHERE processor = {p} ORDER BY segment_id",
            (processor,),
        )
        return [
            PendingRequest(
                segment_id=int(str(row[0])),
                request=_request(row[1], row[2]),
                requested_at_ms=int(str(row[3])),
            )
            for row in rows
        ]

    def hand_over(
        self, processor: str, segment_id: int, owner: str, *, to: str, now_ms: int
    ) -> None:
        """Move an owned claim to `to`, fresh, so nobody else takes it in between."""
        _check_segment(processor, segment_id, owner)
        validation.owner_name(to, name="to")
        validation.integer(now_ms, name="now_ms")
        with self._write() as conn:
            self._owned(conn, processor, segment_id, owner)
            conn.execute(
                self._sql(
                    "UPDATE tokens SET owner = {p}, claimed_at = {p} "
                    "WHERE processor = {p} AND segment_id = {p}"
                ),
                (to, now_ms, processor, segment_id),
            )

    def reset(
        self, processor: str, token: TrackingToken, *, now_ms: int, claim_timeout_ms: int
    ) -> None:
        """Move every segment to `token`; what was processed before becomes replay.

        Replay runs up to the furthest offset any segment reached, a merged part ahead
        included (_replay_point): the events that part handled are not new either. The
        positions and handled batches go too, so the replayed events are handled again. A
        database with positions but no tokens of the processor (the sink of a Spark
        projection) has only those cleared. Checked as `check_reset`, in the transaction.
        """
        check_token(token)
        with self._write() as conn:
            entries = self._resettable(conn, processor, now_ms, claim_timeout_ms)
            replay = _replay_point([t for e in entries for t in (e.token, e.replay_until)])
            conn.execute(
                self._sql(
                    "UPDATE tokens SET token = {p}, replay_until = {p}, owner = NULL, "
                    "claimed_at = NULL WHERE processor = {p}"
                ),
                (token.to_json(), None if replay is None else replay.to_json(), processor),
            )
            for table in (*_PROGRESS_TABLES, "projection_leases"):
                conn.execute(
                    self._sql(f"DELETE FROM {table} WHERE processor = {{p}}"), (processor,)
                )

    def check_reset(self, processor: str, *, now_ms: int, claim_timeout_ms: int) -> None:
        """Raise what `reset` would refuse, changing nothing.

        So that a reset across databases (a journal and a projection's sink) is refused
        before any of them changes: UnknownProcessorError when the database holds neither
        tokens nor positions (nor handled batches) of the processor, UnableToClaimTokenError
        while one of its segments is claimed or a Spark projection of that name holds a lease
        (renew_projection_lease) renewed within `claim_timeout_ms`.
        """
        with self._db.connection() as conn:
            self._resettable(conn, processor, now_ms, claim_timeout_ms)

    def _resettable(
        self, conn: SqlConnection, processor: str, now_ms: int, claim_timeout_ms: int
    ) -> list[TokenEntry]:
        """The processor's segments, once its reset is known to be allowed (see check_reset)."""
        validation.processor_name(processor)
        check_claim_times(now_ms, claim_timeout_ms)
        entries = self._entries(conn, processor)
        if not entries and not self._has_progress(conn, processor):
            msg = f"processor {processor!r} has no tokens or positions to reset"
            raise UnknownProcessorError(msg)
        live = [e for e in entries if e.is_held(now_ms=now_ms, claim_timeout_ms=claim_timeout_ms)]
        if live:
            msg = (
                f"processor {processor!r} is running (segment {live[0].segment} is claimed "
                f"by {live[0].owner!r}): stop it before resetting"
            )
            raise UnableToClaimTokenError(msg)
        lease = conn.execute(
            self._sql(
                "SELECT owner, heartbeat_at FROM projection_leases WHERE processor = {p} "
                "AND heartbeat_at >= {p}"
            ),
            (processor, now_ms - claim_timeout_ms),
        ).fetchone()
        if lease is not None:
            msg = (
                f"processor {processor!r} is running (a Spark projection: its driver "
                f"{lease[0]!r} renewed its lease {max(0, now_ms - int(lease[1]))} ms ago): stop "
                "its streaming query before resetting"
            )
            raise UnableToClaimTokenError(msg)
        return entries

    def renew_projection_lease(self, processor: str, owner: str, *, now_ms: int) -> None:
        """Write or renew the lease of a running Spark projection, with its heartbeat `now_ms`.

        A projection holds no claim, so this row is what tells `check_reset` that it runs. Its
        driver calls this before the stream starts and every few seconds while the query is
        active; a later driver of the same name takes the row over (a restart after a crash
        need not wait for the old lease to expire).
        """
        validation.processor_name(processor)
        validation.owner_name(owner)
        validation.integer(now_ms, name="now_ms")
        with self._write() as conn:
            conn.execute(
                self._sql(
                    "INSERT INTO projection_leases (processor, owner, heartbeat_at) "
                    "VALUES ({p}, {p}, {p}) ON CONFLICT (processor) DO UPDATE "
                    "SET owner = excluded.owner, heartbeat_at = excluded.heartbeat_at"
                ),
                (processor, owner, now_ms),
            )

    def release_projection_lease(self, processor: str, owner: str) -> None:
        """Delete the projection's lease (a no-op unless `owner` holds it): its query ended."""
        validation.processor_name(processor)
        validation.owner_name(owner)
        with self._write() as conn:
            conn.execute(
                self._sql("DELETE FROM projection_leases WHERE processor = {p} AND owner = {p}"),
                (processor, owner),
            )

    def _has_progress(self, conn: SqlConnection, processor: str) -> bool:
        """Whether positions or handled batches of the processor are stored."""
        return any(
            conn.execute(
                self._sql(f"SELECT 1 FROM {table} WHERE processor = {{p}} LIMIT 1"),
                (processor,),
            ).fetchone()
            is not None
            for table in _PROGRESS_TABLES
        )

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
        without releasing it) used to keep its token for ever, and status and cleanup judged
        the reader by it. Moving its token also ends the expired claim, as taking it over
        would: an owner that was only stalled then finds its claim lost when it resumes, and
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

    @contextmanager
    def batch(
        self,
        processor: str,
        segment_id: int,
        owner: str,
        *,
        mask: int | None = None,
        idle_limit_ms: int | None = None,
    ) -> Iterator[SqlBatch]:
        """One batch: handler writes, positions, dead letters and token in one transaction.

        With `mask` (the segment's as its events were read) the token is stored only while the
        segment still has that mask: after a split or merge under a lapsed claim, a worker
        still reading the old segment must not move the new one's token. With `idle_limit_ms`
        a batch whose process stalls that long between two statements is ended (see _write).
        """
        _check_segment(processor, segment_id, owner)
        if mask is not None:
            validation.integer(mask, name="mask")
        if idle_limit_ms is not None:
            validation.integer(idle_limit_ms, name="idle_limit_ms", minimum=1)
        with self._write(idle_limit_ms) as conn:
            batch = SqlBatch(self, conn, processor, segment_id)
            yield batch
            batch.commit(owner, mask=mask)

    def dead_letters(self, processor: str) -> Sequence[DeadLetter]:
        """The processor's dead letters, oldest first."""
        validation.processor_name(processor)
        rows = self._fetchall(
            "SELECT persistence_id, sequence_nr, position, event_offset, error FROM dead_letters "
            "WHERE processor = {p} ORDER BY id",
            (processor,),
        )
        return [
            DeadLetter(
                persistence_id=PersistenceId(str(r[0])),
                sequence_nr=int(r[1]),
                position=int(r[2]),
                offset_key=bytes(r[3]),
                error=str(r[4]),
            )
            for r in rows
        ]

    def positions(self, processor: str) -> Mapping[PersistenceId, int]:
        """The last processed position of every persistence id."""
        validation.processor_name(processor)
        rows = self._fetchall(
            "SELECT persistence_id, position FROM processed_positions WHERE processor = {p}",
            (processor,),
        )
        return {PersistenceId(str(r[0])): int(r[1]) for r in rows}

    def handled(
        self, processor: str, *, after: bytes, up_to: bytes
    ) -> AbstractSet[tuple[PersistenceId, int]]:
        """The events recorded as handled by batches between these offset keys."""
        validation.processor_name(processor)
        _check_offset_key(after, name="after")
        _check_offset_key(up_to, name="up_to")
        rows = self._fetchall(
            "SELECT events FROM handled_batches WHERE processor = {p} AND last_offset > {p} "
            "AND first_offset <= {p}",
            (processor, after, up_to),
        )
        return {
            (PersistenceId(pid), int(position))
            for (events,) in rows
            for pid, position in json.loads(str(events))
        }

    def forget_handled(self, processor: str, *, before: bytes) -> None:
        """Drop the records of batches whose last offset key is below `before`."""
        validation.processor_name(processor)
        _check_offset_key(before, name="before")
        with self._write() as conn:
            conn.execute(
                self._sql(
                    "DELETE FROM handled_batches WHERE processor = {p} AND last_offset < {p}"
                ),
                (processor, before),
            )

    def _insert(
        self,
        conn: SqlConnection,
        processor: str,
        segment: Segment,
        token: TrackingToken | None,
        owner: str | None,
        claimed_at: int | None,
        replay_until: TrackingToken | None,
    ) -> None:
        conn.execute(
            self._sql(
                f"INSERT INTO tokens (processor, {_ENTRY}) VALUES ({{p}}, {{p}}, {{p}}, {{p}}, "
                "{p}, {p}, {p})"
            ),
            (
                processor,
                segment.segment_id,
                segment.mask,
                None if token is None else token.to_json(),
                owner,
                claimed_at,
                None if replay_until is None else replay_until.to_json(),
            ),
        )

    def _entries(
        self, conn: SqlConnection, processor: str, *, lock: bool = False
    ) -> list[TokenEntry]:
        rows = conn.execute(
            self._sql(
                f"SELECT {_ENTRY} FROM tokens WHERE processor = {{p}} ORDER BY segment_id"
                + (self.LOCK_ROWS if lock else "")
            ),
            (processor,),
        ).fetchall()
        return [_entry(processor, row) for row in rows]

    def _pending(
        self, conn: SqlConnection, processor: str, segment_id: int
    ) -> SegmentRequest | None:
        row = conn.execute(
            self._sql(
                "SELECT action, target_owner FROM segment_requests "
                "WHERE processor = {p} AND segment_id = {p}"
            ),
            (processor, segment_id),
        ).fetchone()
        return None if row is None else _request(row[0], row[1])

    def _find(self, conn: SqlConnection, processor: str, segment_id: int) -> TokenEntry | None:
        row = conn.execute(
            self._sql(
                f"SELECT {_ENTRY} FROM tokens WHERE processor = {{p}} AND segment_id = {{p}}"
                + self.LOCK_ROWS
            ),
            (processor, segment_id),
        ).fetchone()
        return None if row is None else _entry(processor, row)

    def _entry(self, conn: SqlConnection, processor: str, segment_id: int) -> TokenEntry:
        entry = self._find(conn, processor, segment_id)
        if entry is None:
            msg = f"processor {processor!r} has no segment {segment_id}"
            raise UnknownSegmentError(msg)
        return entry

    def _owned(
        self, conn: SqlConnection, processor: str, segment_id: int, owner: str
    ) -> TokenEntry:
        entry = self._entry(conn, processor, segment_id)
        if entry.owner != owner:
            msg = (
                f"processor {processor!r} segment {entry.segment} is not claimed by {owner!r} "
                f"(owner: {entry.owner!r}); only the owner may split or merge it"
            )
            raise UnableToClaimTokenError(msg)
        return entry


class SqlBatch:
    """The BatchTransaction of SqlTokenStore; lives inside one write transaction."""

    def __init__(
        self, store: SqlTokenStore, conn: SqlConnection, processor: str, segment_id: int
    ) -> None:
        self._store, self._conn = store, conn
        self._processor, self._segment_id = processor, segment_id
        self._positions: dict[PersistenceId, int] = {}
        self._handled: list[tuple[PersistenceId, int, bytes]] = []
        self._token: TrackingToken | None = None

    @property
    def connection(self) -> SqlConnection:
        """The transaction's connection: handler writes through it commit with the token."""
        return self._conn

    @property
    def placeholder(self) -> str:
        """The driver's parameter placeholder."""
        return self._store.PARAM

    def positions(self, persistence_ids: Iterable[PersistenceId]) -> Mapping[PersistenceId, int]:
        """Last processed positions, including those recorded in this batch."""
        wanted = sorted(set(persistence_ids) - set(self._positions))
        found: dict[PersistenceId, int] = {}
        if wanted:
            marks = ", ".join(["{p}"] * len(wanted))
            rows = self._conn.execute(
                self._store._sql(
                    "SELECT persistence_id, position FROM processed_positions "
                    f"WHERE processor = {{p}} AND persistence_id IN ({marks})"
                ),
                (self._processor, *wanted),
            ).fetchall()
            found = {PersistenceId(str(r[0])): int(r[1]) for r in rows}
        found.update(self._positions)
        return found

    def record(self, persistence_id: PersistenceId, position: int) -> None:
        """Mark a position processed (stored at commit)."""
        self._positions[persistence_id] = max(position, self._positions.get(persistence_id, 0))

    def record_handled(
        self, persistence_id: PersistenceId, position: int, offset_key: bytes
    ) -> None:
        """Record one event as handled (stored at commit)."""
        self._handled.append((persistence_id, position, offset_key))

    def dead_letter(self, letter: DeadLetter) -> None:
        """Keep a failed event with its error."""
        self._conn.execute(
            self._store._sql(
                "INSERT INTO dead_letters (processor, segment_id, persistence_id, sequence_nr, "
                "position, event_offset, error, failed_at) VALUES "
                "({p}, {p}, {p}, {p}, {p}, {p}, {p}, {p})"
            ),
            (
                self._processor,
                self._segment_id,
                letter.persistence_id,
                letter.sequence_nr,
                letter.position,
                letter.offset_key,
                letter.error,
                0,
            ),
        )

    def store_token(self, token: TrackingToken) -> None:
        """The segment's token after this batch."""
        self._token = token

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """SAVEPOINT around one handler call, so a retry or a skip undoes only its writes.

        The savepoint's own statements fail only when the transaction is lost (its session
        ended): StorageUnavailableError then says it is the batch's failure, not the handler's,
        so that the batch is rolled back and claimed again instead of retried and given to
        error_mode (which stopped a processor whose session ended in a careful rerun).
        """
        self._own("SAVEPOINT ordo_event")
        try:
            yield
        except BaseException:
            self._own("ROLLBACK TO SAVEPOINT ordo_event")
            self._own("RELEASE SAVEPOINT ordo_event")
            raise
        self._own("RELEASE SAVEPOINT ordo_event")

    def _own(self, statement: str) -> None:
        """Run one of the batch's own statements; any failure means the transaction is lost."""
        try:
            self._conn.execute(statement)
        except Exception as exc:  # the driver's error: sqlite3's or psycopg's
            msg = f"the batch's transaction is lost: {exc}"
            raise StorageUnavailableError(msg) from exc

    def commit(self, owner: str, *, mask: int | None = None) -> None:
        """Write positions, handled events and the token, unless the claim was lost.

        A lost claim raises UnableToClaimTokenError, which rolls the whole batch back.
        Positions go in as few statements as the drivers' parameter limits allow (a round trip
        per persistence id cost PostgreSQL most of a batch), in persistence id order, so that
        two batches touching the same rows lock them in one order; handled events as one row.
        """
        sql = self._store._sql
        ordered = sorted(self._positions.items())
        for start in range(0, len(ordered), _POSITIONS_PER_STATEMENT):
            chunk = ordered[start : start + _POSITIONS_PER_STATEMENT]
            self._conn.execute(
                sql(
                    "INSERT INTO processed_positions (processor, persistence_id, position) "
                    f"VALUES {', '.join(['({p}, {p}, {p})'] * len(chunk))} "
                    "ON CONFLICT (processor, persistence_id) DO UPDATE "
                    "SET position = excluded.position "
                    "WHERE excluded.position > processed_positions.position"
                ),
                [value for pid, position in chunk for value in (self._processor, pid, position)],
            )
        if self._handled:
            offsets = [offset_key for _, _, offset_key in self._handled]
            self._conn.execute(
                sql(
                    "INSERT INTO handled_batches (processor, last_offset, first_offset, events) "
                    "VALUES ({p}, {p}, {p}, {p})"
                ),
                (
                    self._processor,
                    max(offsets),
                    min(offsets),
                    json.dumps([[pid, position] for pid, position, _ in self._handled]),
                ),
            )
        if self._token is None:
            return
        same_mask = "" if mask is None else " AND mask = {p}"
        updated = self._conn.execute(
            sql(
                "UPDATE tokens SET token = {p} WHERE processor = {p} AND segment_id = {p} "
                f"AND owner = {{p}}{same_mask}"
            ),
            (self._token.to_json(), self._processor, self._segment_id, owner)
            + (() if mask is None else (mask,)),
        ).rowcount
        if not updated:
            also = "" if mask is None else f" with mask {mask}"
            msg = (
                f"processor {self._processor!r} segment {self._segment_id}{also} is no longer "
                f"claimed by {owner!r}; the batch is rolled back"
            )
            raise UnableToClaimTokenError(msg)


def _check_segment(processor: object, segment_id: object, *owner: object) -> None:
    """The names and segment id a segment's operations take, checked before any statement.

    Unchecked, a segment id of True claimed segment 1 on SQLite (a StorageError on PostgreSQL),
    "0" or 0.0 claimed segment 0 on both, and an owner of 5 or with a NUL was refused by
    PostgreSQL only, as a StorageError.
    """
    validation.processor_name(processor)
    validation.integer(segment_id, name="segment_id")
    for name in owner:
        validation.owner_name(name)


def _check_request(request: object) -> None:
    """A SegmentRequest whose action is a SegmentAction; a hand-over names its new owner."""
    if not isinstance(request, SegmentRequest) or not isinstance(request.action, SegmentAction):
        msg = f"request must be a SegmentRequest with a SegmentAction, got {request!r:.80}"
        raise InvalidInputError(msg)
    if request.action is SegmentAction.HAND_OVER or request.target_owner is not None:
        validation.owner_name(request.target_owner, name="target_owner")


def _check_offset_key(value: object, *, name: str) -> None:
    if not isinstance(value, bytes):
        msg = f"{name} must be an offset key (bytes), got {type(value).__name__}"
        raise InvalidInputError(msg)


def _entry(processor: str, row: Sequence[object]) -> TokenEntry:
    segment_id, mask, token, owner, claimed_at, replay_until = row
    return TokenEntry(
        processor=processor,
        segment=Segment(int(str(segment_id)), int(str(mask))),
        token=TrackingToken.from_json(None if token is None else str(token)),
        owner=None if owner is None else str(owner),
        claimed_at_ms=None if claimed_at is None else int(str(claimed_at)),
        replay_until=None if replay_until is None else TrackingToken.from_json(str(replay_until)),
    )


def _request(action: object, target_owner: object) -> SegmentRequest:
    return SegmentRequest(
        action=SegmentAction(str(action)),
        target_owner=None if target_owner is None else str(target_owner),
    )


def _replay_point(tokens: Iterable[TrackingToken | None]) -> TrackingToken | None:
    """The token up to which events are replays: the furthest offset any of `tokens` reached.

    A merged token resumes at its lower half's offset, but its parts ahead handled events up
    to theirs (TrackingToken.reached): those are replays too. The boundary is a point, so it
    has no parts ahead; None when nothing was processed.
    """
    reached = [r for t in tokens if t is not None and (r := t.reached) is not None]
    return TrackingToken(max(reached)) if reached else None
