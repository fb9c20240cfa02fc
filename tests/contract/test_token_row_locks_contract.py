"""Token rows under concurrent PostgreSQL transactions: requests, merges and resets wait in turn."""

from __future__ import annotations

import threading
from collections.abc import Callable

import psycopg
import pytest

from operations_support import wait_for_a_lock_wait
from ordo.errors import OrdoError, TransactionConflictError, UnableToClaimTokenError
from ordo.processing.control import ControlReceipt, release_segment
from ordo.processing.segment import Segment
from ordo.processing.segment_request import PendingRequest, SegmentAction, SegmentRequest
from ordo.processing.token import TrackingToken
from ordo.storage.open import stores_at
from ordo.storage.stores import Stores
from ordo.types import PersistenceId
from token_support import T1, T2, TIMEOUT
from token_support import applied as _applied
from token_support import holding_0_and_1 as _holding_0_and_1
from token_support import pending as _pending


@pytest.mark.postgres
def test_a_request_stored_while_the_owner_takes_one_is_not_lost(postgres_dsn: str) -> None:
    """take_request read the pending request and then deleted the segment's row: under READ
    COMMITTED a request another process stored in between was deleted unseen (the owner acted
    on the older one). Here that process's request is written, not committed, when the owner
    takes the segment's request: the take waits for it and returns the newer request."""
    release = SegmentRequest(action=SegmentAction.RELEASE)
    taken: list[SegmentRequest | None] = []
    with stores_at(postgres_dsn) as stores, psycopg.connect(postgres_dsn) as other:
        stores.tokens.initialize("p", segment_count=1)
        stores.tokens.request("p", 0, SegmentRequest(action=SegmentAction.SPLIT), now_ms=0)
        other.execute(  # what request() writes (the latest wins), not committed yet
            "INSERT INTO segment_requests (processor, segment_id, action, target_owner, "
            "requested_at) VALUES ('p', 0, 'release', NULL, 1) ON CONFLICT (processor, "
            "segment_id) DO UPDATE SET action = excluded.action, "
            "target_owner = excluded.target_owner, requested_at = excluded.requested_at"
        )
        owner = threading.Thread(target=lambda: taken.append(stores.tokens.take_request("p", 0)))
        owner.start()
        wait_for_a_lock_wait(postgres_dsn, "DELETE FROM segment_requests")
        other.commit()
        owner.join(timeout=30)
        assert taken == [release]
        assert stores.tokens.pending_requests("p") == []


@pytest.mark.postgres
def test_a_request_made_while_the_owner_takes_the_pending_one_replaces_nothing(
    postgres_dsn: str,
) -> None:
    """request() read the pending request and then stored its own: under READ COMMITTED an
    owner's take committed in between deleted the one read, and the request said it replaced
    it (the operator's receipt named it). Here the owner's take is written, not committed,
    when the request reads: the read waits for it, and finds nothing replaced."""
    split = SegmentRequest(action=SegmentAction.SPLIT)
    replaced: list[PendingRequest | None] = []
    with stores_at(postgres_dsn) as stores, psycopg.connect(postgres_dsn) as owner:
        stores.tokens.initialize("p", segment_count=1)
        stores.tokens.request("p", 0, SegmentRequest(action=SegmentAction.RELEASE), now_ms=0)
        owner.execute(  # what take_request() deletes, not committed yet
            "DELETE FROM segment_requests WHERE processor = 'p' AND segment_id = 0"
        )
        asking = threading.Thread(
            target=lambda: replaced.append(stores.tokens.request("p", 0, split, now_ms=1))
        )
        asking.start()
        wait_for_a_lock_wait(postgres_dsn, "segment_requests", unless_ended=asking)
        owner.commit()
        asking.join(timeout=30)
        assert replaced == [None]
        assert _pending(stores) == [(0, split)]


def _behind_locked_rows(
    postgres_dsn: str, stores: Stores, rows: str, *calls: Callable[[Stores], object]
) -> list[object]:
    """_behind_a_held_lock, the lock held on the token rows of processor "p" that `rows` (a
    WHERE condition) selects."""
    hold = f"SELECT 1 FROM tokens WHERE processor = 'p' AND {rows} FOR UPDATE"
    return _behind_a_held_lock(postgres_dsn, stores, (hold, ()), *calls)


def _behind_a_held_lock(
    postgres_dsn: str,
    stores: Stores,
    hold: tuple[str, tuple[object, ...]],
    *calls: Callable[[Stores], object],
) -> list[object]:
    """Each call's result, or the OrdoError it raised, in order: each runs in a thread of its
    own, started once the one before waits for a lock (or has returned without waiting), while
    another transaction holds what `hold` (a statement and its parameters) locked, until all
    wait; then it rolls back."""
    outcomes: list[object] = [None] * len(calls)

    def run(index: int) -> None:
        try:
            outcomes[index] = calls[index](stores)
        except OrdoError as exc:
            outcomes[index] = exc

    threads = [threading.Thread(target=run, args=(index,)) for index in range(len(calls))]
    with psycopg.connect(postgres_dsn) as other:
        other.execute(*hold)
        for started, thread in enumerate(threads, start=1):
            thread.start()
            waiting = sum(earlier.is_alive() for earlier in threads[:started])
            wait_for_a_lock_wait(postgres_dsn, "processor", sessions=waiting, unless_ended=thread)
        other.rollback()
    for thread in threads:
        thread.join(timeout=30)
    return outcomes


@pytest.mark.postgres
def test_a_release_made_while_the_owner_asks_its_merge_again_comes_after_the_hand_over(
    postgres_dsn: str,
) -> None:
    """The owner asked its merge again and then, in a second transaction, for the sibling: an
    operator's release made between the two replaced the merge and withdrew no hand-over (none
    was stored yet), and the hand-over asked next sent segment 1 to an owner that was not
    merging any more. One transaction now: here it holds segment 0's row and waits for 1's;
    the release waits for 0's, then replaces the merge and withdraws the hand-over. Its
    receipt names the merge it replaced: it read the pending requests before it waited, and
    said it replaced nothing."""
    with stores_at(postgres_dsn) as stores:
        _holding_0_and_1(stores)
        outcomes = _behind_locked_rows(
            postgres_dsn,
            stores,
            "segment_id = 1",
            lambda stores: stores.tokens.request_merge("p", 0, "a", now_ms=1),
            lambda stores: release_segment(
                stores.tokens, "p", 0, now_ms=2, claim_timeout_ms=TIMEOUT
            ),
        )
        assert outcomes == [
            True,
            ControlReceipt(
                is_done=False,
                message="asked a to release Segment[0/1] (replacing the pending merge request)",
            ),
        ]
        assert _pending(stores) == [(0, SegmentRequest(action=SegmentAction.RELEASE))]


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("ask", "outcomes"),
    [
        (
            lambda stores, segment_id, owner: stores.tokens.merge(
                "p", segment_id, owner, now_ms=1, claim_timeout_ms=TIMEOUT
            ),
            ["UnableToClaimTokenError", "UnableToClaimTokenError"],
        ),
        (
            lambda stores, segment_id, owner: stores.tokens.request_merge(
                "p", segment_id, owner, now_ms=1
            ),
            ["PendingHandOverError", "bool"],
        ),
    ],
    ids=["merge", "request_merge"],
)
def test_the_owners_of_a_pair_merging_it_at_once_do_not_deadlock(
    postgres_dsn: str, ask: Callable[[Stores, int, str], object], outcomes: list[str]
) -> None:
    """Each owner's merge locked its own segment's row and then its sibling's: two owners
    merging the same pair at the same moment deadlocked, and PostgreSQL ended one with an
    error. Both lock the lower segment's row first now, so one waits for the other: the first
    finds the sibling held (merge) or asks for it, and the second is refused."""
    with stores_at(postgres_dsn) as stores:
        _holding_0_and_1(stores)
        ended = _behind_locked_rows(
            postgres_dsn,
            stores,
            "segment_id IN (0, 1)",
            lambda s: ask(s, 0, "a"),
            lambda s: ask(s, 1, "b"),
        )
    assert sorted(type(outcome).__name__ for outcome in ended) == outcomes


@pytest.mark.postgres
def test_a_claim_committed_while_a_reset_waits_for_its_row_refuses_the_reset(
    postgres_dsn: str,
) -> None:
    """reset read the token rows unlocked, found none claimed and then cleared every owner:
    under READ COMMITTED a claim committed in between was wiped (owner NULL) and the positions
    of the processor that had just taken it deleted. Here the claim is written, not committed,
    when the reset starts: the reset waits for the row, sees the claim and is refused."""
    outcomes: list[object] = []

    def reset() -> None:
        try:
            stores.tokens.reset("p", TrackingToken(), now_ms=1, claim_timeout_ms=TIMEOUT)
        except OrdoError as exc:
            outcomes.append(exc)
        else:
            outcomes.append(None)

    with stores_at(postgres_dsn) as stores, psycopg.connect(postgres_dsn) as other:
        stores.tokens.initialize("p", segment_count=2)
        _applied(stores, {"x": 3})
        other.execute(  # what claim() writes, not committed yet
            "UPDATE tokens SET owner = 'a', claimed_at = 1 WHERE processor = 'p' AND segment_id = 1"
        )
        thread = threading.Thread(target=reset)
        thread.start()
        wait_for_a_lock_wait(postgres_dsn, "tokens")
        other.commit()
        thread.join(timeout=30)
        assert [type(outcome) for outcome in outcomes] == [UnableToClaimTokenError]
        entry = stores.tokens.entries("p")[1]
        assert (entry.owner, entry.claimed_at_ms) == ("a", 1)
        assert stores.tokens.positions("p") == {"x": 3}


@pytest.mark.postgres
def test_a_merge_committed_while_a_reset_waits_for_its_rows_refuses_the_reset(
    postgres_dsn: str,
) -> None:
    """The merge deletes the two rows the reset waits to lock and inserts the merged one,
    claimed: a locked read skips the deleted rows and cannot see the new one, so a reset that
    checked only what it locked found segments 1 and 3 unclaimed and wiped the merged claim."""
    with stores_at(postgres_dsn) as stores:
        stores.tokens.initialize("p", segment_count=4)
        stores.tokens.claim("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
        outcomes = _behind_locked_rows(
            postgres_dsn,
            stores,
            "segment_id = 2",
            lambda stores: stores.tokens.merge("p", 0, "a", now_ms=1, claim_timeout_ms=TIMEOUT),
            lambda stores: stores.tokens.reset(
                "p", TrackingToken(), now_ms=1, claim_timeout_ms=TIMEOUT
            ),
        )
        assert outcomes[0] == Segment(0, 1)
        assert isinstance(outcomes[1], UnableToClaimTokenError)
        entry = stores.tokens.entries("p")[0]
        assert (entry.segment, entry.owner, entry.claimed_at_ms) == (Segment(0, 1), "a", 1)


def _x_at_3_claimed_by_a(stores: Stores) -> None:
    """Processor "p" of one segment, claimed by "a" at 0, whose batch stored x's position 3."""
    stores.tokens.initialize("p", segment_count=1)
    stores.tokens.claim("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    with stores.tokens.batch("p", 0, "a") as batch:
        batch.record(PersistenceId("x"), 3)


@pytest.mark.postgres
def test_a_reset_and_a_batch_committing_under_an_expired_claim_do_not_deadlock(
    postgres_dsn: str,
) -> None:
    """The batch wrote its positions and then its token; the reset locks the token rows and
    then deletes the positions: a reset made while the batch was between the two (its claim
    expired, its worker slow) waited for a position the batch held, the batch for the token
    row the reset held, and PostgreSQL ended one of them as a deadlock. Here the batch waits
    between them (for an uncommitted row of another transaction, the last handled batch's)
    when the reset starts. The batch takes its token row first now: the reset waits for the
    batch to commit, then clears what it wrote."""

    def commit_batch(stores: Stores) -> None:
        with stores.tokens.batch("p", 0, "a") as batch:
            batch.record(PersistenceId("x"), 4)
            batch.record_handled(PersistenceId("x"), 4, T2.to_bytes())
            batch.store_token(TrackingToken(T2))

    with stores_at(postgres_dsn) as stores:
        _x_at_3_claimed_by_a(stores)
        outcomes = _behind_a_held_lock(
            postgres_dsn,
            stores,
            (  # the handled batch the committing one writes too, uncommitted
                "INSERT INTO handled_batches (processor, last_offset, first_offset, events) "
                "VALUES ('p', %s, %s, '[]')",
                (T2.to_bytes(), T2.to_bytes()),
            ),
            commit_batch,
            lambda stores: stores.tokens.reset(
                "p", TrackingToken(), now_ms=TIMEOUT + 1, claim_timeout_ms=TIMEOUT
            ),
        )
        assert outcomes == [None, None]
        (entry,) = stores.tokens.entries("p")
        assert (entry.token, entry.owner, entry.replay_until) == (
            TrackingToken(),
            None,
            TrackingToken(T2),
        )
        assert stores.tokens.positions("p") == {}
        assert stores.tokens.handled("p", after=T1.to_bytes(), up_to=T2.to_bytes()) == set()


@pytest.mark.postgres
def test_a_reset_and_a_projection_batch_lock_positions_in_one_order(postgres_dsn: str) -> None:
    """The reset's DELETE locked the positions in the order its scan found them (a sequential
    scan's: as they were written, here c, a, b), a projection's batch in persistence id order:
    a batch committing while its lease had lapsed held a and waited for c, which the reset
    held while it waited for a, a deadlock. Here the batch waits for b (another transaction
    holds it) when the reset starts. The reset locks them in persistence id order now: it
    waits for a until the batch has committed."""
    with stores_at(postgres_dsn) as stores:
        for persistence_id in "cab":
            _applied(stores, {persistence_id: 1})
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute("ANALYZE processed_positions")  # as autovacuum would: a seq scan
        outcomes = _behind_a_held_lock(
            postgres_dsn,
            stores,
            ("SELECT 1 FROM processed_positions WHERE persistence_id = 'b' FOR UPDATE", ()),
            lambda stores: _applied(stores, {"a": 2, "b": 2, "c": 2}),
            lambda stores: stores.tokens.reset(
                "p", TrackingToken(), now_ms=0, claim_timeout_ms=TIMEOUT
            ),
        )
        assert outcomes == [None, None]
        assert stores.tokens.positions("p") == {}


@pytest.mark.postgres
def test_a_projection_starting_while_a_reset_runs_waits_for_it_and_keeps_its_lease(
    postgres_dsn: str,
) -> None:
    """reset read the projection's lease unlocked, then deleted it at its commit: a projection
    that started in between (its driver's lease committed, its source reading the positions
    the reset was about to clear) had its lease deleted and ran on, and the reset reported
    success. Here the reset, past its check, waits for a position another transaction holds
    when the driver writes its first lease. The reset holds the lease row from its check on
    now: the write waits for the reset and then stands, so that the next reset is refused."""
    with stores_at(postgres_dsn) as stores:
        stores.tokens.initialize("p", segment_count=1)  # the projection's tokens, in its journal
        _applied(stores, {"x": 3})
        outcomes = _behind_a_held_lock(
            postgres_dsn,
            stores,
            ("SELECT 1 FROM processed_positions WHERE persistence_id = 'x' FOR UPDATE", ()),
            lambda stores: stores.tokens.reset(
                "p", TrackingToken(), now_ms=1, claim_timeout_ms=TIMEOUT
            ),
            lambda stores: stores.tokens.renew_projection_lease("p", "driver-1", now_ms=1),
        )
        assert outcomes == [None, None]
        assert stores.tokens.positions("p") == {}
        with pytest.raises(UnableToClaimTokenError, match="driver 'driver-1' renewed its lease"):
            stores.tokens.check_reset("p", now_ms=1, claim_timeout_ms=TIMEOUT)


@pytest.mark.postgres
@pytest.mark.parametrize("stored", [True, False], ids=["stored-id", "new-id"])
def test_two_attempts_at_an_event_at_once_apply_it_once(postgres_dsn: str, stored: bool) -> None:
    """Two attempts at one event at the same time (a projection run twice, a speculative
    task) both read the positions before either committed (under READ COMMITTED nothing made
    the later read wait), so both applied the event: the second commit's position write did
    nothing, its handler's write stood. Here the first attempt has read its positions and
    waits while the second runs; the second waits for the first's commit now, and then skips
    the event: of an id with a stored position (its row is locked) and of a new one (its row
    inserted at the read)."""
    pid, position = PersistenceId("x"), 2 if stored else 1
    read, go = threading.Event(), threading.Event()

    def attempt(stores: Stores, *, pause: bool = False) -> None:
        with stores.tokens.batch("p", 0, "spark") as batch:
            applied = batch.positions([pid]).get(pid, 0)
            if pause:
                read.set()
                go.wait(timeout=30)
            if applied < position:  # a handler's write, as a projection's to its sink
                batch.connection.execute("INSERT INTO applied VALUES (%s)", (position,))
                batch.record(pid, position)

    with stores_at(postgres_dsn) as stores:
        if stored:
            _applied(stores, {pid: 1})
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE applied (position BIGINT NOT NULL)")
        first = threading.Thread(target=lambda: attempt(stores, pause=True))
        first.start()
        assert read.wait(timeout=30)
        second = threading.Thread(target=lambda: attempt(stores))
        second.start()
        wait_for_a_lock_wait(postgres_dsn, "processed_positions", unless_ended=second)
        go.set()
        for thread in (first, second):
            thread.join(timeout=30)
        with psycopg.connect(postgres_dsn) as conn:
            rows = conn.execute("SELECT position FROM applied").fetchall()
        assert rows == [(position,)]
        assert stores.tokens.positions("p") == {pid: position}


@pytest.mark.postgres
def test_a_reset_while_a_batch_under_an_expired_claim_holds_its_positions_ends_one_of_them(
    postgres_dsn: str,
) -> None:
    """A batch locks its positions when it reads them and its token row at commit; a reset
    locks the token rows and then the positions. Made while the batch (its claim expired, its
    worker slow) is between the two, the reset waits for a position, the batch's commit for
    the token row: PostgreSQL rolls one back as a deadlock, TransactionConflictError, and the
    other commits. Either way what is stored is one of them whole, never a mix."""
    outcomes: dict[str, object] = {}
    read, go = threading.Event(), threading.Event()

    def run(name: str, call: Callable[[], object]) -> None:
        try:
            outcomes[name] = call()
        except OrdoError as exc:
            outcomes[name] = exc

    def slow_batch(stores: Stores) -> None:
        with stores.tokens.batch("p", 0, "a") as batch:
            batch.positions([PersistenceId("x")])
            read.set()
            go.wait(timeout=30)
            batch.record(PersistenceId("x"), 4)
            batch.store_token(TrackingToken(T2))

    with stores_at(postgres_dsn) as stores:
        _x_at_3_claimed_by_a(stores)
        batching = threading.Thread(target=run, args=("batch", lambda: slow_batch(stores)))
        batching.start()
        assert read.wait(timeout=30)
        resetting = threading.Thread(
            target=run,
            args=(
                "reset",
                lambda: stores.tokens.reset(
                    "p", TrackingToken(), now_ms=TIMEOUT + 1, claim_timeout_ms=TIMEOUT
                ),
            ),
        )
        resetting.start()
        wait_for_a_lock_wait(postgres_dsn, "processed_positions", unless_ended=resetting)
        go.set()
        for thread in (batching, resetting):
            thread.join(timeout=30)
        (entry,) = stores.tokens.entries("p")
        ended = [name for name, outcome in outcomes.items() if outcome is not None]
        assert ended in (["batch"], ["reset"])
        assert isinstance(outcomes[ended[0]], TransactionConflictError)
        if ended == ["reset"]:
            assert (entry.token, entry.owner) == (TrackingToken(T2), "a")
            assert stores.tokens.positions("p") == {"x": 4}
        else:
            assert (entry.token, entry.owner) == (TrackingToken(), None)
            assert stores.tokens.positions("p") == {}
