"""check_tag_views on journals broken by hand: it must report what it is shown."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from ordo import EventsByTagSettings, NewEvent, open_journal
from ordo.storage.open import stores_at
from ordo.tools.verification import check_tag_views


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
        report = check_tag_views(stores.journal, stores.tag_views, settings.bucket_size)
    assert (report.tagged_events, report.tag_view_rows) == (2, 1)
    assert report.missing == (("order", "p", 1),)
    assert not report.is_clean
