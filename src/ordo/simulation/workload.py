"""A realistic, repeatable event workload: orders moving through their life cycle.

Activity is skewed as in real systems: a few persistence ids are hot, many write a handful of
events, and customers mostly write once (a sign-up) and never again. Each writer owns the
persistence ids whose index is congruent to its number, as a sharded application would, so no
two writers append to the same id.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from ordo.journal.event import NewEvent

TAGS = ("order", "payment", "shipping", "customer")

# Each step of an order's life: (event type, tags).
_ORDER_STEPS = (
    ("OrderPlaced", ("order",)),
    ("PaymentReceived", ("order", "payment")),
    ("OrderPacked", ("order",)),
    ("OrderShipped", ("order", "shipping")),
    ("OrderDelivered", ("order", "shipping")),
)
_CURRENCIES = ("EUR", "USD", "GBP")
HOT_SHARE = 0.3
"""Share of appends that go to a few hot persistence ids (Pareto-distributed)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """How much to write and how it is spread."""

    events: int
    persistence_ids: int
    writers: int
    seed: int = 1
    handovers: float = 0.0
    """Share of a writer's appends that go to an id another writer owns."""


def writer_batches(workload: Workload, writer: int) -> Iterator[tuple[str, list[NewEvent]]]:
    """The (persistence id, events) appends of one writer, in order, until its share is done."""
    rng = random.Random(workload.seed * 1_000_003 + writer)
    # Writers beyond the number of ids own none and write nothing: the others share every
    # event (a run with fewer ids than writers wrote only their shares, fewer than asked).
    owners = min(workload.writers, workload.persistence_ids)
    if writer >= owners:
        return
    share = workload.events // owners + (1 if writer < workload.events % owners else 0)
    steps: dict[int, int] = {}
    written = 0
    while written < share:
        owner = writer
        if workload.handovers and rng.random() < workload.handovers:
            owner = rng.randrange(owners)
        owned = range(owner, workload.persistence_ids, workload.writers)
        if rng.random() < HOT_SHARE:
            index = owned[min(int(rng.paretovariate(1.2)) - 1, len(owned) - 1)]
        else:
            index = owned[rng.randrange(len(owned))]
        if index % 5 == 4:
            pid, events = _customer(index, rng)
        else:
            step = steps.get(index, 0)
            steps[index] = step + 1
            pid, events = _order(index, step, rng)
        events = events[: share - written]
        written += len(events)
        yield pid, events


def _order(index: int, step: int, rng: random.Random) -> tuple[str, list[NewEvent]]:
    count = rng.choice((1, 1, 1, 2, 3))
    events = []
    for offset in range(count):
        kind, tags = _ORDER_STEPS[(step + offset) % len(_ORDER_STEPS)]
        payload = {
            "type": kind,
            "order_id": f"o-{index}",
            "amount_cents": rng.randrange(100, 100_000),
            "currency": rng.choice(_CURRENCIES),
            "lines": rng.randrange(1, 9),
        }
        events.append(NewEvent.of(payload, tags=tags, manifest=kind))
    return f"order-{index}", events


def _customer(index: int, rng: random.Random) -> tuple[str, list[NewEvent]]:
    payload = {"type": "CustomerRegistered", "customer_id": f"c-{index}", "tier": rng.randrange(3)}
    return f"customer-{index}", [
        NewEvent.of(payload, tags=("customer",), manifest="CustomerRegistered")
    ]
