"""The token store contract: batches of tokens, positions and handled events; unclaimed advances."""

from __future__ import annotations

from functools import partial

import pytest

from operations_support import execute
from ordo.errors import (
    InvalidIdentifierError,
    InvalidInputError,
    StorageIntegrityError,
    UnableToClaimTokenError,
)
from ordo.processing.control import merge_segment
from ordo.processing.ports import DeadLetter
from ordo.processing.segment import Segment
from ordo.processing.token import PartAhead, TrackingToken
from ordo.storage.stores import Stores
from ordo.time import TimeUUID
from ordo.types import PersistenceId
from token_support import T1, T2, TIMEOUT, claimed_with_token


def test_a_batch_stores_the_token_positions_and_dead_letters_together(stores: Stores) -> None:
    stores.tokens.initialize("p", segment_count=1)
    stores.tokens.claim("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    with stores.tokens.batch("p", 0, "a") as batch:
        assert batch.positions([PersistenceId("x")]) == {}
        batch.record(PersistenceId("x"), 3)
        batch.dead_letter(
            DeadLetter(
                persistence_id=PersistenceId("y"),
                sequence_nr=7,
                position=2,
                offset_key=T1.to_bytes(),
                error="ValueError: bad",
            )
        )
        batch.store_token(TrackingToken(T1))
    assert stores.tokens.entries("p")[0].token == TrackingToken(T1)
    assert [d.error for d in stores.tokens.dead_letters("p")] == ["ValueError: bad"]
    with stores.tokens.batch("p", 0, "a") as batch:
        assert batch.positions([PersistenceId("x"), PersistenceId("z")]) == {"x": 3}
    assert stores.tokens.positions("p") == {"x": 3}  # z was read, not recorded: no row


def test_a_batch_stores_positions_of_many_ids_and_never_moves_one_back(stores: Stores) -> None:
    pids = [PersistenceId(f"id-{n:04d}") for n in range(2_500)]  # several statements' worth
    stores.tokens.initialize("p", segment_count=1)
    stores.tokens.claim("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    with stores.tokens.batch("p", 0, "a") as batch:
        for n, pid in enumerate(reversed(pids)):
            batch.record(pid, n + 1)
    with stores.tokens.batch("p", 0, "a") as batch:
        batch.record(pids[0], 1)  # older than what is stored: ignored
        batch.record(pids[1], 10_000)

    stored = stores.tokens.positions("p")

    assert len(stored) == len(pids)
    assert stored[pids[0]] == len(pids)
    assert stored[pids[1]] == 10_000
    assert stored[pids[-1]] == 1


def test_handled_events_are_found_by_their_batches_offsets_and_forgotten_below_a_point(
    stores: Stores,
) -> None:
    t = [TimeUUID.parse(f"{n}f1a2c10-e5f0-11f1-8000-000000000001") for n in range(1, 7)]
    x, y = PersistenceId("x"), PersistenceId("y")
    stores.tokens.initialize("p", segment_count=1)
    stores.tokens.claim("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    for events in ([(x, 1, t[0]), (y, 1, t[1])], [(x, 2, t[3]), (y, 2, t[2])], [(x, 3, t[4])]):
        with stores.tokens.batch("p", 0, "a") as batch:
            for pid, position, offset in events:
                batch.record_handled(pid, position, offset.to_bytes())
    with stores.tokens.batch("p", 0, "a"):
        pass  # a batch that handled nothing records nothing

    def handled(after: int, up_to: int) -> set[tuple[str, int]]:
        return set(stores.tokens.handled("p", after=t[after].to_bytes(), up_to=t[up_to].to_bytes()))

    assert handled(0, 5) == {(x, 1), (y, 1), (x, 2), (y, 2), (x, 3)}
    assert handled(1, 5) == {(x, 2), (y, 2), (x, 3)}  # batches reaching past t[1]
    assert handled(1, 2) == {(x, 2), (y, 2)}  # and starting up to t[2]: t[2] - t[3]
    assert handled(4, 5) == set()
    assert stores.tokens.handled("other", after=b"", up_to=t[5].to_bytes()) == set()
    stores.tokens.forget_handled("p", 0, "b", before=t[2].to_bytes())  # b holds no claim
    assert handled(0, 5) == {(x, 1), (y, 1), (x, 2), (y, 2), (x, 3)}
    stores.tokens.forget_handled("p", 0, "a", before=t[2].to_bytes())  # the first batch ends before
    assert handled(0, 5) == {(x, 2), (y, 2), (x, 3)}


def test_a_handled_batch_that_is_not_json_is_named(stores: Stores, journal_url: str) -> None:
    """A record damaged by hand was json's bare JSONDecodeError in the processor's claim."""
    stores.tokens.initialize("p", segment_count=1)
    stores.tokens.claim("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    with stores.tokens.batch("p", 0, "a") as batch:
        batch.record_handled(PersistenceId("x"), 1, T1.to_bytes())
    execute(journal_url, "UPDATE handled_batches SET events = '[[' WHERE processor = 'p'")

    with pytest.raises(StorageIntegrityError) as caught:
        stores.tokens.handled("p", after=b"", up_to=T2.to_bytes())

    assert str(caught.value).startswith(
        "the stored event list of a handled batch of processor 'p' is not JSON: "
    )


def test_a_batch_of_a_lost_claim_is_rolled_back_whole(stores: Stores) -> None:
    stores.tokens.initialize("p", segment_count=1)
    stores.tokens.claim("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    stores.tokens.claim("p", 0, "b", now_ms=20_000, claim_timeout_ms=TIMEOUT)  # a's expired

    def process_as_a() -> None:
        with stores.tokens.batch("p", 0, "a") as batch:
            batch.record(PersistenceId("x"), 9)
            batch.record_handled(PersistenceId("x"), 9, T2.to_bytes())
            batch.store_token(TrackingToken(T2))

    with pytest.raises(UnableToClaimTokenError):
        process_as_a()
    assert stores.tokens.entries("p")[0].token == TrackingToken()
    assert stores.tokens.handled("p", after=b"", up_to=T2.to_bytes()) == set()
    with stores.tokens.batch("p", 0, "b") as batch:
        assert batch.positions([PersistenceId("x")]) == {}


def test_a_batch_read_with_another_mask_stores_no_token(stores: Stores) -> None:
    """A worker that read segment 0/0 may not move the token of the 0/1 a split left there."""
    stores.tokens.initialize("p", segment_count=1)
    stores.tokens.claim("p", 0, "a", now_ms=0, claim_timeout_ms=TIMEOUT)
    stores.tokens.split("p", 0, "a")  # a keeps segment id 0, now 0/1

    def store_as(mask: int) -> None:
        with stores.tokens.batch("p", 0, "a", mask=mask) as batch:
            batch.record(PersistenceId("x"), 9)
            batch.store_token(TrackingToken(T2))

    with pytest.raises(UnableToClaimTokenError, match="with mask 0"):
        store_as(0)
    assert stores.tokens.entries("p")[0].token == TrackingToken()
    store_as(1)
    assert stores.tokens.entries("p")[0].token == TrackingToken(T2)


T3 = TimeUUID.parse("7f1a2c10-e5f0-11f1-8000-000000000001")


def _tokens(stores: Stores) -> list[TrackingToken]:
    return [e.token for e in stores.tokens.entries("p")]


def test_a_reader_without_claims_moves_the_unclaimed_tokens_forward_only(stores: Stores) -> None:
    """What a Spark projection stores after each batch; a claimed token is its owner's."""
    stores.tokens.initialize("p", segment_count=3)
    stores.tokens.claim("p", 2, "worker", now_ms=0, claim_timeout_ms=TIMEOUT)
    stores.tokens.advance_unclaimed("p", T2, now_ms=0, claim_timeout_ms=TIMEOUT)
    assert _tokens(stores) == [TrackingToken(T2), TrackingToken(T2), TrackingToken()]
    # A replayed batch:
    stores.tokens.advance_unclaimed("p", T1, now_ms=0, claim_timeout_ms=TIMEOUT)
    assert _tokens(stores) == [TrackingToken(T2), TrackingToken(T2), TrackingToken()]
    assert stores.tokens.entries("p")[2].owner == "worker"


def test_a_reader_without_claims_keeps_the_merged_parts_ahead_it_has_not_reached(
    stores: Stores,
) -> None:
    stores.tokens.initialize("p", segment_count=2)
    claimed_with_token(stores, 1, "a", T2)
    stores.tokens.release("p", 1, "a")
    merge_segment(stores.tokens, "p", 0, now_ms=0, claim_timeout_ms=TIMEOUT)
    stores.tokens.advance_unclaimed("p", T1, now_ms=0, claim_timeout_ms=TIMEOUT)
    assert _tokens(stores) == [TrackingToken(T1, (PartAhead(Segment(1, 1), T2),))]
    stores.tokens.advance_unclaimed("p", T3, now_ms=0, claim_timeout_ms=TIMEOUT)
    assert _tokens(stores) == [TrackingToken(T3)]


def test_a_reader_without_claims_refuses_what_is_no_offset(stores: Stores) -> None:
    stores.tokens.initialize("p", segment_count=1)
    advance = partial(stores.tokens.advance_unclaimed, claim_timeout_ms=TIMEOUT)
    with pytest.raises(InvalidInputError, match="offset must be a TimeUUID, got str"):
        advance("p", str(T1), now_ms=0)  # type: ignore[arg-type]
    with pytest.raises(InvalidIdentifierError):
        advance("", T1, now_ms=0)
    with pytest.raises(InvalidInputError, match="now_ms"):
        advance("p", T1, now_ms="0")  # type: ignore[arg-type]
    assert _tokens(stores) == [TrackingToken()]


def test_a_reader_without_claims_moves_a_segment_whose_claim_expired(stores: Stores) -> None:
    """An owner that crashed without releasing kept the token still for good: status and
    cleanup then judged a Spark projection of the same name by it. The expired claim ends, so
    that an owner that was only stalled cannot store its older token over the new one."""
    stores.tokens.initialize("p", segment_count=2)
    stores.tokens.claim("p", 0, "crashed", now_ms=0, claim_timeout_ms=TIMEOUT)
    stores.tokens.claim("p", 1, "alive", now_ms=TIMEOUT, claim_timeout_ms=TIMEOUT)
    stores.tokens.advance_unclaimed("p", T1, now_ms=TIMEOUT + 1, claim_timeout_ms=TIMEOUT)
    assert _tokens(stores) == [TrackingToken(T1), TrackingToken()]
    assert [e.owner for e in stores.tokens.entries("p")] == [None, "alive"]
    with (
        pytest.raises(UnableToClaimTokenError, match="no longer claimed by 'crashed'"),
        stores.tokens.batch("p", 0, "crashed") as batch,
    ):
        batch.store_token(TrackingToken(T1))
    assert _tokens(stores) == [TrackingToken(T1), TrackingToken()]


def test_positions_of_more_ids_than_a_statement_takes_parameters_are_read(stores: Stores) -> None:
    """positions() put every id into one IN list: a segment's micro-batch of a projection with
    more persistence ids than the driver takes parameters (PostgreSQL: 65,535) failed."""
    ids = [PersistenceId(f"id-{n}") for n in range(70_000)]
    with stores.tokens.batch("p", 0, "spark") as batch:
        for number, pid in enumerate(ids[::7_000], start=1):
            batch.record(pid, number)
    with stores.tokens.batch("p", 0, "spark") as batch:
        found = batch.positions(ids)

    assert found == {pid: number for number, pid in enumerate(ids[::7_000], start=1)}
