"""A column dropped and added again: the cells written before the drop never show again."""

from __future__ import annotations

from collections.abc import Sequence

from cdc_support import accepted_catalog, schema_of_t, write
from ordo.cdc import (
    ChangeMessage,
    ChangeOp,
    Mutation,
    PartitionState,
)
from ordo.cdc.change import Row
from ordo.cdc.materializer import materialize_partition
from ordo.cdc.schema_catalog import SchemaCatalog
from ordo.cdc.state_json import decode_state, encode_state

V1, V2, V3 = schema_of_t("b", "c"), schema_of_t("b"), schema_of_t("b", "c")
"""Version 2 drops c (an operator accepted it), version 3 adds it again (compatible)."""


def fold_through(
    steps: Sequence[tuple[SchemaCatalog, Mutation]], state: PartitionState | None = None
) -> tuple[PartitionState, list[ChangeMessage]]:
    """Fold each mutation with the versions known when it arrived; the state and the messages."""
    state = state or PartitionState()
    messages: list[ChangeMessage] = []
    for known, mutation in steps:
        folded = materialize_partition(state, [mutation], known.resolve)
        state = folded.state
        messages.extend(folded.messages)
    return state, messages


def rows(messages: list[ChangeMessage]) -> list[tuple[int | None, Row | None, Row | None]]:
    return [(m.schema_id, m.before, m.after) for m in messages]


def test_a_column_added_again_starts_empty_in_after_and_before() -> None:
    _, messages = fold_through(
        [
            (accepted_catalog(V1), write(1, 11, b=1, c=1)),
            (accepted_catalog(V1, V2), write(2, 12, b=2)),
            (accepted_catalog(V1, V2, V3), write(3, 13, b=3)),
            (accepted_catalog(V1, V2, V3), write(4, 13, c=4)),
        ]
    )
    assert rows(messages) == [
        (11, None, {"id": 1, "b": 1, "c": 1}),
        (12, {"id": 1, "b": 1}, {"id": 1, "b": 2}),
        (13, {"id": 1, "b": 2, "c": None}, {"id": 1, "b": 3, "c": None}),
        (13, {"id": 1, "b": 3, "c": None}, {"id": 1, "b": 3, "c": 4}),
    ]


def test_a_late_copy_of_a_write_made_before_the_drop_does_not_bring_it_back() -> None:
    known = accepted_catalog(V1, V2, V3)
    state, messages = fold_through(
        [
            (accepted_catalog(V1), write(1, 11, b=1, c=1)),
            (known, write(2, 13, b=3)),
            (known, write(3, 11, at=1, c=7)),  # another replica's copy: an old write time
            (known, write(4, 11, at=50, c=8)),  # even a newer one is a write of the old column
        ]
    )
    assert rows(messages)[1:] == [(13, {"id": 1, "b": 1, "c": None}, {"id": 1, "b": 3, "c": None})]
    state, messages = fold_through(
        [(known, write(5, 13, c=5)), (known, write(6, 11, at=60, c=9)), (known, write(7, 13, b=7))],
        state,
    )
    assert rows(messages) == [
        (13, {"id": 1, "b": 3, "c": None}, {"id": 1, "b": 3, "c": 5}),
        (13, {"id": 1, "b": 3, "c": 5}, {"id": 1, "b": 7, "c": 5}),
    ]


def test_state_an_older_ordo_wrote_loads_and_forgets_the_dropped_column() -> None:
    older = '[1,null,1,[[[],null,[1],{"b":[1,1],"c":[1,1]}]]]'  # v1's write, folded before
    state = decode_state(older)
    folded = materialize_partition(state, [write(2, 13, b=2)], accepted_catalog(V1, V2, V3).resolve)
    assert rows(folded.messages) == [
        (13, {"id": 1, "b": 1, "c": None}, {"id": 1, "b": 2, "c": None})
    ]
    assert decode_state(encode_state(folded.state)) == folded.state
    assert [m.op for m in folded.messages] == [ChangeOp.UPDATE]
