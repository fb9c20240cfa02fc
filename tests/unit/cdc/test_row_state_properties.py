"""Last write wins (G6): the folded rows do not depend on delivery order or replica duplicates."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ordo.cdc import Audit, Cell, Mutation, PartitionState, reconcile

COLUMNS = ("a", "b", "c")
times = st.integers(min_value=1, max_value=30)  # few values: ties happen often
values = st.none() | st.integers(min_value=0, max_value=3) | st.sampled_from(["x", "y"])
cells = st.builds(
    Cell,
    value=values,
    write_time=times,
    ttl_s=st.none() | st.just(None) | st.integers(min_value=1, max_value=2),
)


@st.composite
def mutations(draw: st.DrawFn) -> Mutation:
    clustering = draw(st.sampled_from([(), (1,), (2,)]))
    kind = draw(st.sampled_from(["write", "insert", "row_delete", "partition_delete"]))
    audit = Audit(source="test", replica=draw(st.sampled_from(["r1", "r2", "r3"])))
    if kind == "partition_delete":
        return Mutation(
            table="t", partition_key=(7,), partition_deleted_at=draw(times), audit=audit
        )
    if kind == "row_delete":
        return Mutation(
            table="t",
            partition_key=(7,),
            clustering_key=clustering,
            row_deleted_at=draw(times),
            audit=audit,
        )
    written = draw(st.dictionaries(st.sampled_from(COLUMNS), cells, min_size=1))
    liveness = None
    if kind == "insert":
        liveness = Cell(value=True, write_time=draw(times))
    return Mutation(
        table="t",
        partition_key=(7,),
        clustering_key=clustering,
        cells=written,
        liveness=liveness,
        audit=audit,
    )


def _fold(sequence: list[Mutation]) -> PartitionState:
    state = PartitionState()
    for mutation in sequence:
        state = state.merged(mutation)
    return state


@given(st.lists(mutations(), max_size=12), st.randoms(use_true_random=False))
def test_final_rows_do_not_depend_on_delivery_order(
    batch: list[Mutation], random: st.Random
) -> None:
    shuffled = list(batch)
    random.shuffle(shuffled)
    assert _fold(shuffled).visible_rows() == _fold(batch).visible_rows()


@given(st.lists(mutations(), max_size=12), st.randoms(use_true_random=False))
def test_replica_duplicates_change_nothing(batch: list[Mutation], random: st.Random) -> None:
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
