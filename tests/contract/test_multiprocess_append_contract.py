"""Several writer processes append to one database at once (the demo's writers)."""

from __future__ import annotations

from ordo.settings import EventsByTagSettings
from ordo.simulation.workload import Workload
from ordo.simulation.writers import WriterPlan, run_writers
from ordo.storage.open import stores_at
from ordo.tools.verification import check_tag_views_of


def test_writer_processes_share_one_journal(journal_url: str) -> None:
    settings = EventsByTagSettings()
    workload = Workload(events=1_500, persistence_ids=300, writers=3, seed=7)
    plan = WriterPlan(url=journal_url, workload=workload, settings=settings)
    report = run_writers(plan, on_progress=lambda _: None)
    assert report.failed_writers == ()
    assert report.events == 1_500
    with stores_at(journal_url) as stores:
        assert stores.journal.summary().events == 1_500
        check = check_tag_views_of(stores, settings.bucket_size)
    assert check.is_clean, check
    assert check.tag_view_rows == check.tagged_events > 1_500
