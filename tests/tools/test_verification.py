"""check_tag_views on journals broken by hand: it must report what it is shown."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from datetime import timedelta
from pathlib import Path

from operations_support import execute
from ordo import EventsByTagSettings, NewEvent, open_journal
from ordo.clock import ManualClock
from ordo.storage.open import stores_at
from ordo.tools.cleanup import Cleanup
from ordo.tools.verification import check_tag_views_of
from ordo.types import Tag

HOUR_NS = 3_600 * 10**9


def test_two_events_numbered_alike_with_one_row_are_reported(tmp_path: Path) -> None:
    """A recovery that numbers an id's next events from 1 again gives two events one number,
    and the tag views can hold only one row for it. The expectations were keyed by number, so
    the second event replaced the first, and its row matched: the report was clean."""
    path = tmp_path / "journal.db"
    settings = EventsByTagSettings()
    with open_journal(f"sqlite:///{path}", settings=settings) as journal:
        journal.append("p", [NewEvent.of(1, tags=["order"])])
        journal.append("p", [NewEvent.of(2, tags=["order"])])
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("""UPDATE messages SET tags = '{"order":1}' WHERE sequence_nr = 2""")
        conn.execute("DELETE FROM tag_views WHERE sequence_nr = 1")
        conn.execute(
            """UPDATE tag_views SET tag_pid_sequence_nr = 1, tags = '{"order":1}'
            WHERE sequence_nr = 2"""
        )
        conn.commit()
    with stores_at(f"sqlite:///{path}") as stores:
        report = check_tag_views_of(stores, settings.bucket_size)
    assert (report.tagged_events, report.tag_view_rows) == (2, 1)
    assert report.missing == (("order", "p", 1),)
    assert not report.is_clean


def test_events_an_expiry_deleted_on_purpose_are_not_missing(tmp_path: Path) -> None:
    """The expiry deletes old rows on purpose and records its horizon, which `ordo verify`
    respects: check_tag_views reported each expired event as missing, so a journal with a TTL
    was never clean (the demo's verdict too). A row deleted by hand after the horizon is still
    missing."""
    url = f"sqlite:///{tmp_path / 'journal.db'}"
    settings = EventsByTagSettings()
    clock = ManualClock(time.time_ns() - 3 * HOUR_NS)
    with open_journal(url, settings=settings, clock=clock) as journal:
        journal.append("p", [NewEvent.of(n, tags=["t", "u"]) for n in range(3)])
        clock.advance(3 * HOUR_NS)
        journal.append("p", [NewEvent.of(n, tags=["t", "u"]) for n in range(3, 5)])
    with stores_at(url) as stores:
        assert Cleanup.of(stores).expire(timedelta(hours=1), tag=Tag("t")).deleted == 3
        report = check_tag_views_of(stores, settings.bucket_size)
        assert report.is_clean, report
        assert (report.tagged_events, report.tag_view_rows) == (7, 7)
    execute(url, "DELETE FROM tag_views WHERE sequence_nr = 5")
    with stores_at(url) as stores:
        report = check_tag_views_of(stores, settings.bucket_size)
    assert report.missing == (("t", "p", 5), ("u", "p", 5))
    assert (report.unexpected, report.duplicated) == ((), ())
