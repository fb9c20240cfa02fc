"""Mutations as change log columns: every mutation comes back equal, in one encoding."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdc_support import mutations
from ordo.cdc import Audit, Cell, Mutation
from ordo.cdc.change_rows import CHANGE_ROW_COLUMNS, ChangeRows, key_text, mutation_from_row
from ordo.errors import MalformedMutationError

audits = st.builds(
    Audit,
    source=st.sampled_from(["cassandra", "sqlite"]),
    replica=st.sampled_from(["", "r1"]),
    segment=st.sampled_from(["CommitLog-1", "slot.snapshot.5"]),
    position=st.integers(min_value=0, max_value=2**62),
    captured_at_us=st.integers(min_value=0, max_value=2**62),
)
keyed = st.builds(
    lambda m, key, audit, schema_id: Mutation(
        table=m.table,
        partition_key=key,
        clustering_key=m.clustering_key,
        cells=m.cells,
        liveness=m.liveness,
        row_deleted_at=m.row_deleted_at,
        partition_deleted_at=m.partition_deleted_at,
        schema_id=schema_id,
        audit=audit,
    ),
    mutations(),
    st.tuples(  # finite: JSON has no NaN or infinities, so a key cannot hold one
        st.integers() | st.text(max_size=5) | st.floats(allow_nan=False, allow_infinity=False),
        st.booleans(),
    ),
    audits,
    st.none() | st.integers(min_value=1, max_value=9),
)


@given(st.lists(keyed, max_size=8))
def test_mutations_come_back_equal_from_their_rows(batch: list[Mutation]) -> None:
    rows = ChangeRows.from_mutations(batch)
    assert len(rows) == len(batch)
    assert rows.mutations() == batch
    assert rows.column("partition_key") == [key_text(m.partition_key) for m in batch]


@given(st.lists(keyed, min_size=1, max_size=8), st.data())
def test_take_and_replaced_select_rows_and_columns(
    batch: list[Mutation], data: st.DataObject
) -> None:
    rows = ChangeRows.from_mutations(batch)
    indices = data.draw(st.lists(st.integers(min_value=0, max_value=len(batch) - 1)))
    assert rows.take(indices).mutations() == [batch[i] for i in indices]
    renamed = rows.replaced("schema_id", [4] * len(batch)).mutations()
    assert [m.schema_id for m in renamed] == [4] * len(batch)


def _write(**cells: Cell) -> Mutation:
    return Mutation(table="t", partition_key=(1,), cells=cells, audit=Audit(source="s"))


def test_cells_of_one_write_time_without_ttl_are_stored_as_plain_values() -> None:
    same = _write(a=Cell(value="x", write_time=5), b=Cell(value=None, write_time=5))
    mixed = _write(a=Cell(value="x", write_time=5), b=Cell(value=1, write_time=6))
    expiring = _write(a=Cell(value="x", write_time=5, ttl_s=3))
    rows = list(ChangeRows.from_mutations([same, mixed, expiring]).rows())
    assert (rows[0]["cells"], rows[0]["cell_values"], rows[0]["cell_values_time"]) == (
        None,
        '{"a":"x","b":null}',
        5,
    )
    assert rows[1]["cell_values"] is None
    assert json.loads(rows[1]["cells"])["b"] == {"value": 1, "write_time": 6, "ttl_s": None}
    assert rows[2]["cell_values"] is None


def test_a_row_written_before_cell_values_existed_is_read() -> None:
    row = dict.fromkeys(CHANGE_ROW_COLUMNS)
    del row["cell_values"], row["cell_values_time"]
    row |= {
        "table": "t",
        "partition_key": "[1]",
        "clustering_key": "[]",
        "cells": '{"a":{"value":2,"write_time":3,"ttl_s":null}}',
        "source": "s",
        "replica": "",
        "segment": "",
        "position": "4",
        "captured_at_us": "0",
    }
    assert mutation_from_row(row) == Mutation(
        table="t",
        partition_key=(1,),
        cells={"a": Cell(value=2, write_time=3)},
        audit=Audit(source="s", position=4),
    )


def test_rows_must_have_every_column_of_one_length() -> None:
    columns: dict[str, list[object]] = {name: [] for name in CHANGE_ROW_COLUMNS}
    with pytest.raises(ValueError, match="one length"):
        ChangeRows({**columns, "position": [1]})
    with pytest.raises(ValueError, match="columns"):
        ChangeRows({name: [] for name in CHANGE_ROW_COLUMNS[1:]})


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_a_mutation_holding_nan_or_an_infinity_gets_no_rows(number: float) -> None:
    with pytest.raises(MalformedMutationError, match=r"mutation of table 't' key \(1,\): "):
        ChangeRows.from_mutations([_write(a=Cell(value=number, write_time=5))])
    keyed = Mutation(
        table="t",
        partition_key=(number,),
        cells={"a": Cell(value=1, write_time=5, ttl_s=9)},
        audit=Audit(source="s"),
    )
    with pytest.raises(MalformedMutationError, match="Out of range float values"):
        ChangeRows.from_mutations([keyed])


@pytest.mark.parametrize(
    ("column", "text"),
    [
        ("cell_values", '{"a":NaN}'),
        ("cell_values", '{"a":Infinity}'),
        ("cell_values", '{"a":1e999}'),
        ("cells", '{"a":{"value":-Infinity,"write_time":5,"ttl_s":null}}'),
        ("partition_key", "[NaN]"),
    ],
)
def test_a_change_log_row_holding_what_is_not_json_does_not_decode(column: str, text: str) -> None:
    """What a producer that allowed NaN wrote: the materializer dead-letters it as unreadable."""
    row = next(ChangeRows.from_mutations([_write(a=Cell(value=1, write_time=5))]).rows())
    if column == "cells":
        row["cell_values"] = row["cell_values_time"] = None
    with pytest.raises(ValueError, match=r"JSON number|range of a double"):
        mutation_from_row({**row, column: text})
