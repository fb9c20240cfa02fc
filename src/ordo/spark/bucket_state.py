"""The materializer's state of one bucket: partition states packed into hash slots.

Every state call of `transformWithStateInPandas` is a round trip from the Python worker to the
JVM, and it costs about as much for a slot of 64 states as for one (0.1-0.4 ms on two cores).
With one map entry per partition key, those round trips took half of the materializer's time, so
a bucket's partition states are grouped into slots, sized to the bucket:

- value state `bucket` (`keys BIGINT, depth INT`): how many partition keys the bucket holds, and
  the slot depth;
- map state `slots` (`slot INT` -> `states STRING`): a JSON object from partition key (the change
  log's JSON text) to its encoded `PartitionState` (`ordo.cdc.state_json`), for the keys whose
  `stable_hash` has `slot` as its low `depth` bits.

When the bucket grows past `SLOT_KEYS << depth` keys the depth grows and every slot is
rewritten, so each key moves a bounded number of times. A batch reads only the slots of the keys
it touches (or scans the bucket when it touches most slots) and decodes only those keys' states.
Changing this layout needs a new checkpoint.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping

from pyspark.sql.streaming.stateful_processor import MapState, ValueState

from ordo.cdc.json_text import compact_json
from ordo.hashing import stable_hash

SLOT_KEYS = 64
"""Partition keys per slot (on average) before the bucket's slots split."""
SCAN_RATIO = 8
"""Scan the bucket instead of reading slots one by one when a batch touches more than
1/SCAN_RATIO of them (a scan streams entries in batches)."""


def depth_for(keys: int) -> int:
    """The smallest slot depth whose slots hold at most SLOT_KEYS keys on average."""
    depth = 0
    while keys > SLOT_KEYS << depth:
        depth += 1
    return depth


def slot_of(partition_key: str, depth: int) -> int:
    """The slot of a partition key at `depth` (the low `depth` bits of its stable hash)."""
    return stable_hash(partition_key) & ((1 << depth) - 1)


class BucketState:
    """Reads and writes one bucket's partition states during one `handleInputRows` call.

    Call `load` once with the keys of the batch, then `store` once with the states that
    changed. Not thread-safe; not picklable (it holds the task's state handles).
    """

    def __init__(self, slots: MapState, bucket: ValueState) -> None:
        self._slots, self._bucket = slots, bucket
        self._keys = self._depth = 0
        self._entries: dict[int, dict[str, str]] = {}
        self._undecoded: dict[int, str] = {}
        """Slots a scan read and no key needed yet: a batch decodes only the slots it uses."""
        self._is_complete = False

    def load(self, partition_keys: Collection[str]) -> dict[str, str]:
        """The stored states of `partition_keys`; a key the bucket does not hold is absent."""
        found = self._bucket.get()
        if found is not None:
            self._keys, self._depth = int(found[0]), int(found[1])
        if self._keys == 0:
            self._is_complete = True
            return {}
        wanted = {slot_of(key, self._depth) for key in partition_keys}
        if len(wanted) * SCAN_RATIO >= 1 << self._depth:
            self._scan()
        else:
            for slot in wanted:
                value = self._slots.getValue((slot,))
                self._entries[slot] = {} if value is None else json.loads(value[0])
        stored: dict[str, str] = {}
        for key in partition_keys:
            state = self._entry(slot_of(key, self._depth)).get(key)
            if state is not None:
                stored[key] = state
        return stored

    def store(self, changed: Mapping[str, str]) -> None:
        """Write the new states of loaded keys; splits the slots when the bucket outgrew them."""
        dirty: set[int] = set()
        added = 0
        for key, state in changed.items():
            slot = slot_of(key, self._depth)
            entry = self._entry(slot)
            added += key not in entry
            entry[key] = state
            dirty.add(slot)
        keys, depth = self._keys + added, depth_for(self._keys + added)
        if depth != self._depth:
            if not self._is_complete:
                self._scan(keep=self._entries)
            for slot in list(self._undecoded):
                self._entry(slot)
            states = {
                key: state for entry in self._entries.values() for key, state in entry.items()
            }
            self._entries = {}
            for key, state in states.items():
                self._entries.setdefault(slot_of(key, depth), {})[key] = state
            if self._keys:
                self._slots.clear()
            dirty = set(self._entries)
        for slot in sorted(dirty):
            self._slots.updateValue((slot,), (compact_json(self._entries[slot]),))
        if (keys, depth) != (self._keys, self._depth):
            self._bucket.update((keys, depth))
            self._keys, self._depth = keys, depth

    def _entry(self, slot: int) -> dict[str, str]:
        """The slot's states by key, decoded on first use (empty when the slot holds none)."""
        entry = self._entries.get(slot)
        if entry is None:
            text = self._undecoded.pop(slot, None)
            entry = self._entries[slot] = {} if text is None else json.loads(text)
        return entry

    def _scan(self, keep: Mapping[int, dict[str, str]] | None = None) -> None:
        """Read every slot; slots in `keep` (already read and changed) stay as they are."""
        kept = keep or {}
        self._undecoded = {
            int(slot[0]): value[0]
            for slot, value in self._slots.iterator()
            if int(slot[0]) not in kept
        }
        self._entries, self._is_complete = dict(kept), True
