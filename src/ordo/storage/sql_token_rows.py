"""The tokens table of tracking processors in SQL: its rows and the write transaction.

The base of every part of SqlTokenStore (segment requests, processed progress, reset, and the
claim, split and merge core), which read and lock token rows the same way on every backend.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import ClassVar

from ordo.errors import (
    InvalidSegmentOperationError,
    UnableToClaimTokenError,
    UnknownSegmentError,
)
from ordo.journal import validation
from ordo.processing.connection import SqlConnection
from ordo.processing.ports import TokenEntry
from ordo.processing.segment import Segment
from ordo.processing.token import TrackingToken
from ordo.storage.sql_store import SqlStore

_ENTRY = "segment_id, mask, token, owner, claimed_at, replay_until"
OWN_IDLE_LIMIT_MS = 10_000
"""How long a transaction running only the store's own statements may sit idle: they follow
each other at once, so a transaction idle this long belongs to a stalled process."""


class SqlTokenRows(SqlStore):
    """Reads and writes of token rows, inside one write transaction per store method.

    Backends name their placeholder and row-lock clause. Thread-safe (connections are per
    thread or pooled).
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

    def _find(
        self, conn: SqlConnection, processor: str, segment_id: int, *, lock: bool = True
    ) -> TokenEntry | None:
        row = conn.execute(
            self._sql(
                f"SELECT {_ENTRY} FROM tokens WHERE processor = {{p}} AND segment_id = {{p}}"
                + (self.LOCK_ROWS if lock else "")
            ),
            (processor, segment_id),
        ).fetchone()
        return None if row is None else _entry(processor, row)

    def _entry(
        self, conn: SqlConnection, processor: str, segment_id: int, *, lock: bool = True
    ) -> TokenEntry:
        return _known(processor, segment_id, self._find(conn, processor, segment_id, lock=lock))

    def _owned(
        self, conn: SqlConnection, processor: str, segment_id: int, owner: str
    ) -> TokenEntry:
        return _check_owned(self._entry(conn, processor, segment_id), owner)

    def _owned_with_sibling(
        self, conn: SqlConnection, processor: str, segment_id: int, owner: str | None
    ) -> tuple[TokenEntry, TokenEntry]:
        """The owned segment and its sibling, both rows locked, the lower segment id first.

        For the operations that change both (merge, request_merge). Two of them on the same
        pair (both owners merging it, each asking for the other's segment) lock the two rows in
        the same order, so on PostgreSQL the second waits for the first: each locked its own
        segment's row first, and two owners merging the pair could deadlock. The mask that
        names the sibling is read before the lock, and the locked rows are read again: a split
        or merge in between leaves no sibling of the segment's mask there. An `owner` of None
        is no owner's: the segment is not checked (an operator's change of free segments).

        Raises:
            UnknownSegmentError: the segment is gone (merged away).
            UnableToClaimTokenError: `owner` does not hold the segment.
            InvalidSegmentOperationError: the root, or a sibling split further or gone.

        """
        entry, sibling = self._owned_and_sibling(conn, processor, segment_id, owner)
        if sibling is None:
            msg = (
                f"processor {processor!r} segment {entry.segment} has no sibling to merge "
                f"with (segment {entry.segment.mergeable_segment_id()} is split further or "
                "does not exist)"
            )
            raise InvalidSegmentOperationError(msg)
        return entry, sibling

    def _owned_and_sibling(
        self, conn: SqlConnection, processor: str, segment_id: int, owner: str | None
    ) -> tuple[TokenEntry, TokenEntry | None]:
        """`_owned_with_sibling`, with None for a sibling that is not there to merge with.

        For `hand_over`, which a missing sibling does not refuse: the hand-over is skipped.
        """
        seen = self._entry(conn, processor, segment_id, lock=False).segment
        sibling_id = seen.mergeable_segment_id()
        locked = {i: self._find(conn, processor, i) for i in sorted({segment_id, sibling_id})}
        entry = _known(processor, segment_id, locked[segment_id])
        if owner is not None:
            _check_owned(entry, owner)
        sibling = locked[sibling_id]
        if sibling is None or not entry.segment.is_mergeable_with(sibling.segment):
            return entry, None
        return entry, sibling


def check_segment(processor: object, segment_id: object, *owner: object) -> None:
    """The names and segment id a segment's operations take, checked before any statement.

    Unchecked, a segment id of True would claim segment 1 on SQLite (a StorageError on
    PostgreSQL), "0" or 0.0 segment 0 on both, and an owner of 5 or with a NUL would be refused
    by PostgreSQL only, as a StorageError.
    """
    validation.processor_name(processor)
    validation.integer(segment_id, name="segment_id")
    for name in owner:
        validation.owner_name(name)


def _known(processor: str, segment_id: int, entry: TokenEntry | None) -> TokenEntry:
    if entry is None:
        msg = f"processor {processor!r} has no segment {segment_id}"
        raise UnknownSegmentError(msg)
    return entry


def _check_owned(entry: TokenEntry, owner: str) -> TokenEntry:
    if entry.owner != owner:
        msg = (
            f"processor {entry.processor!r} segment {entry.segment} is not claimed by "
            f"{owner!r} (owner: {entry.owner!r}); only the owner may split or merge it"
        )
        raise UnableToClaimTokenError(msg)
    return entry


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


def replay_point(tokens: Iterable[TrackingToken | None]) -> TrackingToken | None:
    """The token up to which events are replays: the furthest offset any of `tokens` reached.

    A merged token resumes at its lower half's offset, but its parts ahead handled events up
    to theirs (TrackingToken.reached): those are replays too. The boundary is a point, so it
    has no parts ahead; None when nothing was processed.
    """
    reached = [r for t in tokens if t is not None and (r := t.reached) is not None]
    return TrackingToken(max(reached)) if reached else None
