"""A retyped column (G6): messages conform to their versions, rows are order-independent."""

from __future__ import annotations

from random import Random

from hypothesis import given
from hypothesis import strategies as st

from cdc_support import RETYPED as CATALOG
from cdc_support import fold_one_by_one
from ordo.cdc import Audit, Cell, JsonValue, Mutation
from ordo.cdc.change import ChangeMessage, Row

times = st.integers(min_value=1, max_value=20)


@st.composite
def versioned_writes(draw: st.DrawFn) -> Mutation:
    """A write of key 1 naming version 1 (`n` a long) or 2 (`n` a string of a long)."""
    schema_id = draw(st.sampled_from([11, 12]))
    number = st.integers(min_value=-3, max_value=3)
    n = number if schema_id == 11 else number.map(str)
    values: dict[str, st.SearchStrategy[JsonValue]] = {
        "n": st.none() | n,
        "s": st.none() | st.sampled_from(["x", "y"]),
    }
    written = draw(st.dictionaries(st.sampled_from(["n", "s"]), times, min_size=1))
    cells = {name: Cell(value=draw(values[name]), write_time=at) for name, at in written.items()}
    audit = Audit(source="test", replica=draw(st.sampled_from(["r1", "r2", "r3"])))
    return Mutation(table="t", partition_key=(1,), cells=cells, schema_id=schema_id, audit=audit)


def _folded(sequence: list[Mutation]) -> tuple[list[ChangeMessage], Row | None]:
    """The messages of folding `sequence` one by one, and the last `after` shown as version 2."""
    _, messages = fold_one_by_one(sequence, CATALOG.resolve)
    return messages, _shown(messages)


def _shown(messages: list[ChangeMessage]) -> Row | None:
    if not messages or messages[-1].after is None:
        return None
    after = dict(messages[-1].after)
    n = after["n"]
    after["n"] = None if n is None else str(n)
    return after


@given(st.lists(versioned_writes(), min_size=1, max_size=10), st.randoms(use_true_random=False))
def test_messages_conform_to_their_versions_and_rows_to_any_order(
    batch: list[Mutation], random: Random
) -> None:
    shuffled = list(batch)
    random.shuffle(shuffled)
    messages, row = _folded(batch)
    _, shuffled_row = _folded(shuffled)
    assert shuffled_row == row
    for message in messages:
        schema = CATALOG.resolve(message.schema_id).schema
        for shown in (message.before, message.after):
            assert shown is None or schema.problems(shown) == []
