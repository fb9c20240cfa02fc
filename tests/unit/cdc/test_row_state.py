"""Cassandra's reconciliation rules, one example each."""

from __future__ import annotations

from ordo.cdc import Audit, Cell, Mutation, PartitionState, reconcile

AUDIT = Audit(source="test")


def _write(ts: int, clustering: tuple[int, ...] = (), **values: object) -> Mutation:
    return Mutation(
        table="t",
        partition_key=(1,),
        clustering_key=clustering,
        cells={k: Cell(value=v, write_time=ts) for k, v in values.items()},  # type: ignore[arg-type]
        audit=AUDIT,
    )


def _fold(*mutations: Mutation) -> PartitionState:
    state = PartitionState()
    for mutation in mutations:
        state = state.merged(mutation)
    return state


def test_the_newer_write_wins_whatever_the_order() -> None:
    assert _fold(_write(2, a="new"), _write(1, a="old")).visible(()) == {"a": "new"}


def test_at_equal_time_a_deletion_beats_a_value() -> None:
    assert reconcile(Cell(value="x", write_time=5), Cell(value=None, write_time=5)).value is None


def test_at_equal_time_an_expiring_cell_beats_a_plain_one_and_the_larger_value_wins() -> None:
    plain, expiring = Cell(value="z", write_time=5), Cell(value="a", write_time=5, ttl_s=10)
    assert reconcile(plain, expiring) == expiring
    assert reconcile(Cell(value="a", write_time=5), Cell(value="b", write_time=5)).value == "b"


def test_a_partial_write_keeps_the_other_columns() -> None:
    assert _fold(_write(1, a=1, b=2), _write(2, b=3)).visible(()) == {"a": 1, "b": 3}


def test_an_update_without_marker_disappears_when_its_cells_are_deleted() -> None:
    state = _fold(_write(1, a=1), _write(2, a=None))
    assert state.visible(()) is None


def test_an_inserted_row_exists_with_all_cells_null() -> None:
    insert = Mutation(
        table="t",
        partition_key=(1,),
        cells={"a": Cell(value=None, write_time=1)},
        liveness=Cell(value=True, write_time=1),
        audit=AUDIT,
    )
    assert _fold(insert).visible(()) == {}


def test_a_row_delete_shadows_older_writes_even_when_they_arrive_later() -> None:
    delete = Mutation(table="t", partition_key=(1,), row_deleted_at=5, audit=AUDIT)
    assert _fold(delete, _write(4, a=1)).visible(()) is None
    assert _fold(delete, _write(6, a=1)).visible(()) == {"a": 1}


def test_a_partition_delete_removes_every_row_of_the_partition() -> None:
    delete = Mutation(table="t", partition_key=(1,), partition_deleted_at=5, audit=AUDIT)
    state = _fold(_write(1, (1,), a=1), _write(6, (2,), a=2), delete)
    assert state.visible_rows() == {(2,): {"a": 2}}


def test_a_ttl_expires_in_event_time() -> None:
    ttl = Mutation(
        table="t",
        partition_key=(1,),
        cells={"a": Cell(value=1, write_time=0, ttl_s=1)},
        audit=AUDIT,
    )
    assert _fold(ttl).visible(()) == {"a": 1}
    assert _fold(ttl, _write(2_000_000, b=2)).visible(()) == {"b": 2}
