"""Last write wins (G6): the folded rows do not depend on delivery order or replica duplicates."""

from __future__ import annotations

from random import Random

from hypothesis import given
from hypothesis import strategies as st

from cdc_support import cells, mutations
from ordo.cdc import Cell, Mutation, PartitionState, reconcile


def _fold(sequence: list[Mutation]) -> PartitionState:
    state = PartitionState()
    for mutation in sequence:
        state = state.merged(mutation)
    return state


@given(st.lists(mutations(), max_size=12), st.randoms(use_true_random=False))
def test_final_rows_do_not_depend_on_delivery_order(batch: list[Mutation], random: Random) -> None:
    shuffled = list(batch)
    random.shuffle(shuffled)
    assert _fold(shuffled).visible_rows() == _fold(batch).visible_rows()


@given(st.lists(mutations(), max_size=12), st.randoms(use_true_random=False))
def test_replica_duplicates_change_nothing(batch: list[Mutation], random: Random) -> None:
    duplicated = batch + [random.choice(batch) for _ in batch] if batch else []
    random.shuffle(duplicated)
    assert _fold(duplicated).visible_rows() == _fold(batch).visible_rows()


@given(st.lists(mutations(), min_size=1, max_size=8))
def test_folding_a_mutation_again_is_a_no_op(batch: list[Mutation]) -> None:
    state = _fold(batch)
    for mutation in batch:
        assert state.merged(mutation).visible_rows() == state.visible_rows()


@given(cells, cells)
def test_reconcile_is_commutative(a: Cell, b: Cell) -> None:
    assert reconcile(a, b) == reconcile(b, a)


@given(cells, cells, cells)
def test_reconcile_is_associative(a: Cell, b: Cell, c: Cell) -> None:
    assert reconcile(reconcile(a, b), c) == reconcile(a, reconcile(b, c))
