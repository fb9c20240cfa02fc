"""Slots of a materializer bucket: every stored state comes back, whatever the splits."""

from __future__ import annotations

import random

from bucket_state_doubles import FakeMapState, FakeValueState
from ordo.spark.bucket_state import SLOT_KEYS, BucketState, depth_for


def test_states_survive_batches_and_slot_splits() -> None:
    rng = random.Random(3)
    slots, bucket = FakeMapState(), FakeValueState()
    model: dict[str, str] = {}
    for batch in range(40):
        keys = {f"[{rng.randrange(1000)}]" for _ in range(rng.choice([1, 5, 60, 300]))}
        state = BucketState(slots, bucket)  # type: ignore[arg-type]
        assert state.load(keys) == {k: model[k] for k in keys if k in model}
        changed = {k: f"s{batch}" for k in keys if rng.random() < 0.8}
        if changed:
            state.store(changed)
        model.update(changed)
        assert bucket.value == (len(model), depth_for(len(model)))
    assert len(slots.entries) <= 1 << depth_for(len(model))
    assert BucketState(slots, bucket).load(set(model)) == model  # type: ignore[arg-type]


def test_a_small_batch_reads_only_its_slots() -> None:
    slots, bucket = FakeMapState(), FakeValueState()
    everything = {f"[{i}]": "s" for i in range(SLOT_KEYS * 16)}
    first = BucketState(slots, bucket)  # type: ignore[arg-type]
    first.load(everything)
    first.store(everything)
    assert len(slots.entries) == 16
    slots.calls = 0
    state = BucketState(slots, bucket)  # type: ignore[arg-type]
    assert state.load({"[7]"}) == {"[7]": "s"}
    state.store({"[7]": "t"})
    assert slots.calls == 2  # one slot read, one slot written
