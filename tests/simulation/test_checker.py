"""The simulation's G1-G3 checker on journals broken by hand: it must count what it is shown."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from datetime import timedelta
from pathlib import Path

from ordo import BucketSize, EventsByTagSettings, NewEvent, open_journal
from ordo.settings import QuerySettings
from ordo.simulation.checker import check, expected_events
from ordo.simulation.readers import Delivery, QueryChain
from ordo.storage.open import events_by_tag_at, stores_at

SETTLED = QuerySettings(eventual_consistency_delay=timedelta(0))
"""A current query that reads what was just written."""
EVENTS_BY_TAG = EventsByTagSettings(bucket_size=BucketSize.MINUTE)


def _chain(url: str, tag: str) -> QueryChain:
    """What one run of a real current query over `tag` delivered, as a query chain."""
    chain = QueryChain(tag=tag, starts=[None])
    with events_by_tag_at(url, settings=SETTLED, events_by_tag=EVENTS_BY_TAG) as queries:
        for envelope in queries.current(tag):
            chain.deliveries.append(
                Delivery(
                    0,
                    envelope.persistence_id,
                    envelope.tag_pid_sequence_nr,
                    envelope.offset_key,
                    time.time_ns(),
                )
            )
    return chain


def test_an_event_numbered_as_an_earlier_one_is_lost(tmp_path: Path) -> None:
    """A recovery that numbers an id's next events from 1 again gives two events one number:
    the query delivers the first and drops the second as a duplicate. The expectations were
    keyed by the number, so the second replaced the first and the delivery counted for both."""
    path = tmp_path / "journal.db"
    url = f"sqlite:///{path}"
    with open_journal(url, settings=EVENTS_BY_TAG) as journal:
        journal.append("p", [NewEvent.of(1, tags=["order"])])
        journal.append("p", [NewEvent.of(2, tags=["order"])])
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("""UPDATE messages SET tags = '{"order":1}' WHERE sequence_nr = 2""")
        conn.execute(
            """UPDATE tag_views SET tag_pid_sequence_nr = 1, tags = '{"order":1}'
            WHERE sequence_nr = 2"""
        )
        conn.commit()
    chain = _chain(url, "order")
    assert [d.tag_pid_sequence_nr for d in chain.deliveries] == [1]
    with stores_at(url) as stores:
        expected = expected_events(stores.journal, {})
    verdict = check(expected, [chain], visibility={}, settings=SETTLED)
    assert (verdict.expected, verdict.lost) == (2, 1)
    assert verdict.violations == 1
