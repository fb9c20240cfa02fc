"""The writers' visibility log: how the checker tells a loss the seeds allow from a real one."""

from __future__ import annotations

from pathlib import Path

from ordo.settings import EventsByTagSettings
from ordo.simulation.workload import Workload
from ordo.simulation.writer_log import read_writer_logs, visible_ns
from ordo.simulation.writers import WriterPlan, run_writers
from ordo.storage.open import stores_at
from ordo.types import SequenceNr


def test_every_tag_write_is_logged_without_delays(journal_url: str, tmp_path: Path) -> None:
    """With --max-delay-ms 0 nothing was logged: rows late through a skewed clock alone that a
    restarted query may miss (seed 000) were counted as lost, and the run exited 1."""
    plan = WriterPlan(
        url=journal_url,
        workload=Workload(events=300, persistence_ids=40, writers=2, seed=3),
        settings=EventsByTagSettings(),
        skew_ms=500,
        max_delay_ms=0,
        log_dir=str(tmp_path),
    )
    run_writers(plan, on_progress=lambda _: None)
    visibility = read_writer_logs(tmp_path).visible
    with stores_at(journal_url) as stores:
        tagged = [
            (tag, pid, event.sequence_nr)
            for pid in stores.journal.persistence_ids()
            for event in stores.journal.read_events(
                pid,
                from_sequence_nr=SequenceNr(1),
                to_sequence_nr=stores.journal.highest_sequence_nr(pid),
            )
            for tag in event.tags
        ]
    assert len(tagged) > 300
    assert all(visible_ns(visibility.get((tag, pid), []), nr) for tag, pid, nr in tagged)
