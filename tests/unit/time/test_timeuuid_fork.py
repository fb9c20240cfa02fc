"""A TimeUUIDGenerator copied into a child by os.fork never issues its parent's ids.

The copy drew no bits of its own: at one clock reading parent and child issued the same ids,
so two events of one tag could share an offset, and a reader paging on `offset > last` would
skip one of them.
"""

from __future__ import annotations

import random

from fork_support import in_forked_child
from ordo.clock import ManualClock
from ordo.time import TimeUUID, TimeUUIDGenerator

EPOCH_2015_NS = 1_447_977_600_000_000_000  # 2015-11-20T00:00Z


def issued_in_parent_and_child(generator: TimeUUIDGenerator) -> tuple[list[bytes], list[bytes]]:
    """The keys of 16 ids issued after the fork in the child, and in the parent."""
    child = in_forked_child(lambda: [value.key for value in generator.next_batch(16)])
    assert child.error is None, child.message
    assert isinstance(child.value, list)
    return [value.key for value in generator.next_batch(16)], child.value


def test_a_forked_child_issues_other_ids_than_its_parent_at_the_same_clock_reading() -> None:
    generator = TimeUUIDGenerator(ManualClock(EPOCH_2015_NS))
    generator.next()

    parent, child = issued_in_parent_and_child(generator)

    assert [key[:8] for key in parent] == [key[:8] for key in child]  # the same timestamps
    assert set(parent).isdisjoint(child)
    assert len({key[8:] for key in child}) == 1  # the child's ids share their new low bytes
    assert child == sorted(child)


def test_a_seeded_rng_does_not_make_the_child_repeat_its_parent() -> None:
    """The rng's copy in the child would draw what the parent's draws next: not used there."""
    generator = TimeUUIDGenerator(ManualClock(EPOCH_2015_NS), rng=random.Random(1))

    parent, child = issued_in_parent_and_child(generator)

    assert set(parent).isdisjoint(child)


def test_a_given_node_stays_in_the_child_and_the_clock_seq_is_drawn_again() -> None:
    node = 0x0A0B0C0D0E0F
    generator = TimeUUIDGenerator(ManualClock(EPOCH_2015_NS), node=node)

    parent, child = issued_in_parent_and_child(generator)

    assert set(parent).isdisjoint(child)
    assert {TimeUUID.from_bytes(key).uuid.node for key in parent + child} == {node}
