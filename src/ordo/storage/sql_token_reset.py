"""Resetting a tracking processor in SQL, and the leases of Spark projections that block it.

A part of SqlTokenStore.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from ordo.errors import UnableToClaimTokenError, UnknownProcessorError
from ordo.journal import validation
from ordo.processing.connection import SqlConnection
from ordo.processing.control import check_claim_times, check_token
from ordo.processing.ports import PROJECTION_LEASE_TIMEOUT, TokenEntry
from ordo.processing.token import TrackingToken
from ordo.storage.sql_processed_progress import PROGRESS_TABLES
from ordo.storage.sql_token_rows import SqlTokenRows, replay_point

_PROJECTION_LEASE_TIMEOUT_MS = PROJECTION_LEASE_TIMEOUT // timedelta(milliseconds=1)


class SqlTokenReset(SqlTokenRows):
    """Reset and its checks, and the projection leases they read. Thread-safe."""

    def reset(
        self, processor: str, token: TrackingToken, *, now_ms: int, claim_timeout_ms: int
    ) -> None:
        """Move every segment to `token`; what was processed before becomes replay.

        Replay runs up to the furthest offset any segment reached, a merged part ahead
        included (replay_point): the events that part handled are not new either; or up to
        `token` when that is further, so that the segments' streams do not look back before
        it (EventSource.start), a boundary that flags nothing more: no event up to the token is
        handled again. The positions and handled batches go too, so the replayed events are
        handled again. A database with positions but no tokens of the processor (the sink of a
        Spark projection) has only those cleared. Checked as `check_reset`, in the transaction, on
        the rows it then changes, locked (_locked_entries, _lease): a claim taken or a
        projection started between the check and the update was wiped while it ran.

        On PostgreSQL it locks in the order the batches that write these rows do, so that a
        batch committing meanwhile (its claim or lease lapsed, its worker still running) waits
        for the reset or the reset for it: token rows (by segment id), the lease, then
        positions (by persistence id, _lock_positions), then handled batches. A batch locks
        the positions it reads by persistence id (SqlBatch.positions); at commit a tracking
        processor's locks its token row, then the other positions it writes by persistence
        id, then inserts its handled batch (SqlBatch.commit); a projection's locks only
        positions. A batch holding its token row makes the reset wait until it has committed,
        and the reset clears what it wrote; one that comes later finds its claim gone and is
        rolled back. One that read its positions before the reset and commits after the reset
        took the token rows waits for the reset as the reset waits for it: PostgreSQL rolls
        one back (TransactionConflictError, nothing of it written), a reset to be retried or a
        batch handled again from the reset's token. The lease is locked with the check, before
        the positions: a projection starting meanwhile waits for the whole reset, never
        reading positions it is about to clear; and no other transaction holds the lease row
        with another lock (a driver writes or deletes it alone), so its place in the order
        cannot deadlock.
        """
        check_token(token)
        check = _ResetCheck(processor=processor, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms)
        with self._write() as conn:
            entries = self._resettable(conn, check, lock=True)
            self._lock_positions(conn, processor)
            reached = (t for e in entries for t in (e.token, e.replay_until))
            replay = replay_point([token, *reached])
            conn.execute(
                self._sql(
                    "UPDATE tokens SET token = {p}, replay_until = {p}, owner = NULL, "
                    "claimed_at = NULL WHERE processor = {p}"
                ),
                (token.to_json(), None if replay is None else replay.to_json(), processor),
            )
            for table in (*PROGRESS_TABLES, "projection_leases"):
                conn.execute(
                    self._sql(f"DELETE FROM {table} WHERE processor = {{p}}"), (processor,)
                )

    def check_reset(self, processor: str, *, now_ms: int, claim_timeout_ms: int) -> None:
        """Raise what `reset` would refuse, changing nothing.

        So that a reset across databases (a journal and a projection's sink) is refused
        before any of them changes: UnableToClaimTokenError while one of its segments is
        claimed or a Spark projection of that name holds a fresh lease (_ResetCheck), and
        else UnknownProcessorError when the database holds neither tokens nor positions (nor
        handled batches) of the processor. A fresh lease alone is a projection that started but
        applied no batch yet: it runs, and the reset is refused as of a running projection, not as
        of a sink that holds nothing to reset. A lapsed lease alone counts for nothing, as a
        released one: its driver crashed, and a reset would only delete the row, which refuses
        nothing any more.
        """
        check = _ResetCheck(processor=processor, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms)
        with self._db.connection() as conn:
            self._resettable(conn, check, lock=False)

    def _resettable(
        self, conn: SqlConnection, check: _ResetCheck, *, lock: bool
    ) -> list[TokenEntry]:
        """The processor's segments, once its reset is known to be allowed (see check_reset).

        With `lock`, the token rows are read by _locked_entries and the lease by _lease,
        locked, so that the reset changes what was checked.
        """
        processor = check.processor
        entries = self._locked_entries(conn, processor) if lock else self._entries(conn, processor)
        check.refuse_claims(entries)
        check.refuse_lease(self._lease(conn, check, lock=lock))
        if not entries and not self._has_progress(conn, processor):
            msg = f"processor {processor!r} has no tokens or positions to reset"
            raise UnknownProcessorError(msg)
        return entries

    def _lease(
        self, conn: SqlConnection, check: _ResetCheck, *, lock: bool
    ) -> tuple[str, int] | None:
        """The owner and heartbeat of the processor's projection lease, if it has one.

        With `lock`, the lease row is locked until the commit, and written first when there
        is none (lapsed, so that it refuses nothing; the reset deletes it with the rest): on
        PostgreSQL a projection's lease written before is seen (an upsert reads the newest
        row, and waits for one being written), and one written after waits for the reset
        and then starts from what the reset left. Read unlocked, the lease was checked and
        deleted at the commit: a projection that started in between had its lease deleted
        (until its next heartbeat) and ran on positions the reset cleared, and the reset
        reported success. A row that does not exist cannot be locked, hence the write.
        """
        if lock:
            row = conn.execute(
                self._sql(
                    "INSERT INTO projection_leases (processor, owner, heartbeat_at) "
                    "VALUES ({p}, '', {p}) ON CONFLICT (processor) DO UPDATE "
                    "SET owner = projection_leases.owner RETURNING owner, heartbeat_at"
                ),
                (check.processor, check.oldest_fresh_heartbeat_ms - 1),
            ).fetchone()
        else:
            row = conn.execute(
                self._sql(
                    "SELECT owner, heartbeat_at FROM projection_leases WHERE processor = {p}"
                ),
                (check.processor,),
            ).fetchone()
        return None if row is None else (str(row[0]), int(row[1]))

    def _locked_entries(self, conn: SqlConnection, processor: str) -> list[TokenEntry]:
        """The processor's segments, their rows locked in segment id order until the commit.

        Locked, a row cannot be claimed before the reset clears it: a claim in progress makes
        the lock wait, and PostgreSQL then returns the row as claimed (READ COMMITTED reads a
        locked row again once its writer commits); a claim that comes later waits for the reset
        and takes the reset token. Segment id order is the order merge and request_merge lock
        in, so they wait for each other instead of deadlocking (an UPDATE of every row locked
        them in no set order).

        A merge committed while the lock waited deleted rows (a locked read skips them) and
        inserted its merged one, claimed, which this read cannot see: a second read, unlocked,
        finds the segments changed. Only an owner splits or merges, so the processor runs.

        Raises:
            UnableToClaimTokenError: the processor's segments changed while the lock waited.

        """
        entries = self._entries(conn, processor, lock=True)
        if [e.segment for e in self._entries(conn, processor)] != [e.segment for e in entries]:
            msg = (
                f"processor {processor!r} is running (its segments were split or merged while "
                "the reset waited for them): stop it before resetting"
            )
            raise UnableToClaimTokenError(msg)
        return entries

    def _lock_positions(self, conn: SqlConnection, processor: str) -> None:
        """Lock the processor's positions in persistence id order, as batches write them.

        The DELETE alone locked them in the order its scan found them (a sequential scan's,
        as they were written): a projection's batch committing meanwhile held one the delete
        waited for and waited for one the delete held, a deadlock PostgreSQL ended one of them
        for. A no-op without row locks (SQLite's writers take turns). Counted on the server, so
        that no row travels.
        """
        if self.LOCK_ROWS:
            conn.execute(
                self._sql(
                    "SELECT count(*) FROM (SELECT 1 FROM processed_positions WHERE processor = "
                    f"{{p}} ORDER BY persistence_id{self.LOCK_ROWS}) AS locked"
                ),
                (processor,),
            )

    def renew_projection_lease(self, processor: str, owner: str, *, now_ms: int) -> None:
        """Write or renew the lease of a running Spark projection, with its heartbeat `now_ms`.

        A projection holds no claim, so this row is what tells `check_reset` that it runs. Its
        driver calls this before the stream starts and every few seconds while the query is
        active; a later driver of the same name takes the row over (a restart after a crash
        need not wait for the old lease to expire). A reset in progress holds the row
        (_lease): the write waits for it, so that what the projection reads next is
        what the reset left.
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
            for table in PROGRESS_TABLES
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class _ResetCheck:
    """The refusals of one reset of `processor` at `now_ms` (reset and check_reset share it).

    Made before any connection is opened: a bad name or time is InvalidInputError there.
    Raises UnableToClaimTokenError while a segment is claimed (within `claim_timeout_ms`) or a Spark
    projection of that name holds a lease renewed within `claim_timeout_ms` or
    PROJECTION_LEASE_TIMEOUT, whichever is longer: its driver renews it on a schedule of its
    own, not the claim timeout.
    """

    processor: str
    now_ms: int
    claim_timeout_ms: int

    def __post_init__(self) -> None:
        validation.processor_name(self.processor)
        check_claim_times(self.now_ms, self.claim_timeout_ms)

    @property
    def oldest_fresh_heartbeat_ms(self) -> int:
        """The oldest heartbeat of a lease that still refuses the reset (inclusive)."""
        return self.now_ms - max(self.claim_timeout_ms, _PROJECTION_LEASE_TIMEOUT_MS)

    def refuse_claims(self, entries: Sequence[TokenEntry]) -> None:
        """Refuse while one of the processor's segments is claimed."""
        live = [
            e
            for e in entries
            if e.is_held(now_ms=self.now_ms, claim_timeout_ms=self.claim_timeout_ms)
        ]
        if live:
            msg = (
                f"processor {self.processor!r} is running (segment {live[0].segment} is claimed "
                f"by {live[0].owner!r}): stop it before resetting"
            )
            raise UnableToClaimTokenError(msg)

    def refuse_lease(self, lease: tuple[str, int] | None) -> None:
        """Refuse while `lease` (owner and heartbeat, SqlTokenReset._lease) is fresh."""
        if lease is None:
            return
        owner, heartbeat_at = lease
        if heartbeat_at >= self.oldest_fresh_heartbeat_ms:
            msg = (
                f"processor {self.processor!r} is running (a Spark projection: its driver "
                f"{owner!r} renewed its lease {max(0, self.now_ms - heartbeat_at)} ms ago): stop "
                "its streaming query before resetting"
            )
            raise UnableToClaimTokenError(msg)
