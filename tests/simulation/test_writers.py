"""The writers' clocks: whatever the seed, some run behind and some ahead."""

from __future__ import annotations

import pytest

from ordo.settings import EventsByTagSettings
from ordo.simulation.workload import Workload
from ordo.simulation.writers import WriterPlan


def _skews(seed: int, writers: int, skew_ms: int) -> list[int]:
    plan = WriterPlan(
        url="sqlite:///unused.db",
        workload=Workload(events=100, persistence_ids=10, writers=writers, seed=seed),
        settings=EventsByTagSettings(),
        skew_ms=skew_ms,
    )
    return [plan.skew_ns(w) for w in range(writers)]


@pytest.mark.parametrize("writers", [2, 3, 4])
@pytest.mark.parametrize("seed", [1, 2, 3, 7, 42])
def test_some_clocks_are_behind_and_some_ahead(seed: int, writers: int) -> None:
    """Seed 1, the default and the tests', drew every clock ahead, and a clock ahead never
    makes a row late: no run of the tests had a writer whose rows a query could pass by."""
    skews = _skews(seed, writers, skew_ms=300)
    assert min(skews) < 0 < max(skews), skews
    assert all(abs(skew) <= 300_000_000 for skew in skews)
    assert skews == _skews(seed, writers, skew_ms=300)  # repeatable from the seed


def test_no_skew_asked_is_none_given() -> None:
    assert _skews(1, 4, skew_ms=0) == [0, 0, 0, 0]
