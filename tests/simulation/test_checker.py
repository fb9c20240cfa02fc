"""The simulation's G1-G3 checker on journals broken by hand: it must count what it is shown."""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from contextlib import closing
from datetime import timedelta
from pathlib import Path

import pytest

from ordo import BucketSize, EventsByTagSettings, NewEvent, open_journal
from ordo.settings import QuerySettings
from ordo.simulation.checker import (
    EventKey,
    Expected,
    check,
    expected_events,
    has_nothing_left_to_wait_for,
)
from ordo.simulation.readers import Delivery, QueryChain
from ordo.storage.open import events_by_tag_at, stores_at
from ordo.time import TimeUUID
from ordo.time.duration import nanoseconds

SETTLED = QuerySettings(eventual_consistency_delay=timedelta(0))
"""A current query that reads what was just written."""
MINUTE = BucketSize.MINUTE
EVENTS_BY_TAG = EventsByTagSettings(bucket_size=MINUTE)


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
    verdict = check(expected, [chain], visibility={}, settings=SETTLED, bucket_size=MINUTE)
    assert (verdict.expected, verdict.lost) == (2, 1)
    assert verdict.violations == 1


def _journal(path: Path) -> str:
    """A journal of p's events 1 and 2 and q's event 1, all tagged "order", in that order."""
    url = f"sqlite:///{path}"
    with open_journal(url, settings=EVENTS_BY_TAG) as journal:
        journal.append("p", [NewEvent.of(1, tags=["order"])])
        journal.append("p", [NewEvent.of(2, tags=["order"])])
        journal.append("q", [NewEvent.of(3, tags=["order"])])
    return url


def _expected(url: str) -> dict[EventKey, Expected]:
    with stores_at(url) as stores:
        return expected_events(stores.journal, {})


LATE = QuerySettings(eventual_consistency_delay=timedelta(seconds=1))
"""A live query whose delay p's first event (visible 2 s after its offset) exceeded."""


@pytest.mark.parametrize(
    ("start", "has_forgotten", "excused"),
    [
        pytest.param(bytes(16), False, 1, id="from an offset: taken as the first"),
        pytest.param(None, False, 0, id="from the first time bucket: nr 1 expected"),
        pytest.param(None, True, 1, id="from the first time bucket, after forgetting ids"),
    ],
)
def test_a_first_encounter_is_excused_only_where_the_query_takes_it_as_the_first(
    tmp_path: Path, start: bytes | None, *, has_forgotten: bool, excused: int
) -> None:
    """A run that met p first at its event 2 and never delivered the late event 1. A query
    from the first time bucket expects every id to start at 1 and searches, then fails,
    rather than skip it, until it may have forgotten an id (`cleanup_old_persistence_ids`,
    twice the bucket by default, behind an event it delivered, where the delay keeps it):
    excusing such a run too let a real loss pass."""
    url = _journal(tmp_path / "journal.db")
    expected = _expected(url)
    by_key = {(d.persistence_id, d.tag_pid_sequence_nr): d for d in _chain(url, "order").deliveries}
    q1, p2 = by_key[("q", 1)], by_key[("p", 2)]
    q1_ns = TimeUUID.from_bytes(q1.offset_key).epoch_ns
    forgotten_ns = nanoseconds(LATE.eventual_consistency_delay + 2 * timedelta(minutes=1))
    chain = QueryChain(
        tag="order",
        starts=[start],
        deliveries=[
            q1,
            dataclasses.replace(p2, delivered_ns=q1_ns + (forgotten_ns if has_forgotten else 0)),
        ],
    )
    p1_seen = expected[("order", "p", 1)].offset_ns + 2_000_000_000
    visibility = {("order", "p"): [(1, 1, p1_seen)], ("order", "q"): []}
    verdict = check(expected, [chain], visibility=visibility, settings=LATE, bucket_size=MINUTE)
    assert (verdict.excused["first_encounter"], verdict.lost) == (excused, 1 - excused)


def test_deliveries_of_no_journal_event_are_violations(tmp_path: Path) -> None:
    """A row with no event behind it (an id the journal does not have) and an event at
    another offset than the journal gave it were delivered and counted nowhere."""
    path = tmp_path / "journal.db"
    url = _journal(path)
    with closing(sqlite3.connect(path)) as conn:
        conn.execute(
            """INSERT INTO tag_views SELECT tag, timebucket, timeuuid, 'ghost',
            tag_pid_sequence_nr, sequence_nr, persistence_id_hash, writer_uuid, serializer,
            manifest, payload, metadata, tags FROM tag_views WHERE persistence_id = 'q'"""
        )
        conn.execute(
            """UPDATE tag_views SET timeuuid = (
                SELECT timeuuid FROM messages WHERE persistence_id = 'q'
            ) WHERE persistence_id = 'p' AND sequence_nr = 2"""
        )
        conn.commit()
    chain = _chain(url, "order")
    assert sorted((d.persistence_id, d.tag_pid_sequence_nr) for d in chain.deliveries) == [
        ("ghost", 1),
        ("p", 1),
        ("p", 2),
        ("q", 1),
    ]
    verdict = check(_expected(url), [chain], visibility={}, settings=SETTLED, bucket_size=MINUTE)
    assert (verdict.lost, verdict.not_in_journal, verdict.violations) == (0, 2, 2)


def test_each_query_of_a_tag_is_judged_on_its_own(tmp_path: Path) -> None:
    """Two consumers of one tag (`--queries` above the four tags): the second never delivered
    p's event 2, and the first's delivery of it hid the loss."""
    url = _journal(tmp_path / "journal.db")
    whole = _chain(url, "order")
    partial = QueryChain(
        tag="order",
        starts=[None],
        deliveries=[d for d in whole.deliveries if d.tag_pid_sequence_nr == 1],
    )
    verdict = check(
        _expected(url), [whole, partial], visibility={}, settings=SETTLED, bucket_size=MINUTE
    )
    assert (verdict.expected, verdict.delivered, verdict.lost) == (6, 5, 1)


@pytest.mark.parametrize(
    ("restarted", "late_s", "has_nothing_left"),
    [
        pytest.param(True, 2, True, id="late, and a restart started after it: passed by"),
        pytest.param(False, 2, False, id="late, no restart after it: a run may still find it"),
        pytest.param(True, 0, False, id="visible in time: promised"),
    ],
)
def test_the_run_waits_only_for_events_its_queries_may_still_deliver(
    tmp_path: Path, *, restarted: bool, late_s: int, has_nothing_left: bool
) -> None:
    """A run that never delivered p's event 2, visible `late_s` after its offset. The
    simulation waited its whole patience (5 to 8 s in the tests) for an event a restart had
    passed by for good, which nearly every run with restarts had: the seeds allow its loss,
    and no run could deliver it any more."""
    url = _journal(tmp_path / "journal.db")
    expected = _expected(url)
    p2_offset = expected[("order", "p", 2)].offset_key
    deliveries = [d for d in _chain(url, "order").deliveries if d.offset_key != p2_offset]
    q1 = next(d for d in deliveries if d.persistence_id == "q")
    chain = QueryChain(
        tag="order",
        starts=[None, q1.offset_key] if restarted else [None],
        deliveries=deliveries,
        distinct={(d.persistence_id, d.tag_pid_sequence_nr) for d in deliveries},
    )
    p2_seen = expected[("order", "p", 2)].offset_ns + late_s * 1_000_000_000
    visibility = {("order", "p"): [(2, 2, p2_seen)]}
    assert (
        has_nothing_left_to_wait_for(
            [chain], expected, visibility, settings=LATE, bucket_size=MINUTE
        )
        is has_nothing_left
    )
