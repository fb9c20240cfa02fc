"""The generated workload: every event asked for is written, however ids and writers compare."""

from __future__ import annotations

import pytest

from ordo.simulation.workload import Workload, writer_batches


@pytest.mark.parametrize(("writers", "persistence_ids"), [(4, 300), (16, 3), (2, 1)])
def test_the_writers_write_every_event_asked_for(writers: int, persistence_ids: int) -> None:
    """Fewer ids than writers: the writers that own no id wrote nothing and their shares were
    dropped (`ordo simulate --writers 2 --persistence-ids 1 --events 3000` wrote 1,500)."""
    workload = Workload(
        events=3_000, persistence_ids=persistence_ids, writers=writers, seed=8, handovers=0.5
    )
    batches = [batch for w in range(writers) for batch in writer_batches(workload, w)]
    assert sum(len(events) for _, events in batches) == 3_000
    assert len({pid for pid, _ in batches}) <= persistence_ids
