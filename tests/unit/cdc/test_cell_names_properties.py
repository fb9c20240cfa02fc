"""A column dropped and added again (G6): rows are order-independent, old cells stay gone."""

from __future__ import annotations

from functools import reduce
from random import Random

from hypothesis import given
from hypothesis import strategies as st

from cdc_support import accepted_catalog, cells, fold_one_by_one, schema_of_t
from ordo.cdc import (
    Audit,
    ColumnType,
    Mutation,
    reconcile,
)
from ordo.cdc.change import Row
from ordo.cdc.schema import full_row

CATALOG = accepted_catalog(
    *(schema_of_t(*columns, of=ColumnType.JSON) for columns in [("b", "c"), ("b",), ("b", "c")])
)
READDED = 13
"""The schema id of the version that adds `c` again."""


@st.composite
def versioned_writes(draw: st.DrawFn) -> Mutation:
    """A partial write of key 1 naming version 1, 2 (without c) or 3, from some replica."""
    schema_id = draw(st.sampled_from([11, 12, READDED]))
    columns = ["b"] if schema_id == 12 else ["b", "c"]
    audit = Audit(source="test", replica=draw(st.sampled_from(["r1", "r2", "r3"])))
    written = draw(st.dictionaries(st.sampled_from(columns), cells, min_size=1))
    return Mutation(table="t", partition_key=(1,), cells=written, schema_id=schema_id, audit=audit)


def _final_row(sequence: list[Mutation]) -> Row | None:
    """The row as the current version shows it, after folding `sequence` one by one."""
    state, _ = fold_one_by_one(sequence, CATALOG.resolve)
    values = state.visible(())
    current = CATALOG.resolve(None)
    return None if values is None else full_row(current.schema, (1,), current.cells.shown(values))


@given(st.lists(versioned_writes(), min_size=1, max_size=12), st.randoms(use_true_random=False))
def test_the_added_column_shows_only_its_own_writes_in_any_delivery_order(
    batch: list[Mutation], random: Random
) -> None:
    shuffled = list(batch)
    random.shuffle(shuffled)
    row = _final_row(batch)
    assert _final_row(shuffled) == row
    added = [m.cells["c"] for m in batch if m.schema_id == READDED and "c" in m.cells]
    now = max(m.write_time for m in batch)
    winner = reduce(reconcile, added) if added else None
    expected = winner.value if winner is not None and winner.is_live(now) else None
    assert row is None or row["c"] == expected
