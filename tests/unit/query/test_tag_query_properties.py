"""For any interleaving and delay within the configured bounds, each persistence id's events
are delivered exactly once and in order (G1, G2)."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from tag_view_doubles import InMemoryTagView, Row, at, row, tag_query

ECD_MS, PERIOD_MS, INTERVAL_MS, STEP_MS = 200, 1_000, 200, 50
MAX_DELAY_MS = ECD_MS + PERIOD_MS - INTERVAL_MS - STEP_MS
START_MS = 55_000  # a minute bucket boundary falls inside the run


@st.composite
def workloads(draw: st.DrawFn) -> list[tuple[Row, int]]:
    """Events (row, arrival ms): offsets increase per id, arrivals lag by a bounded delay."""
    events: list[tuple[Row, int]] = []
    for pid in range(draw(st.integers(1, 4))):
        clock = START_MS + draw(st.integers(0, 2_000))
        for nr in range(1, draw(st.integers(1, 8)) + 1):
            clock += draw(st.integers(1, 1_500))
            delay = draw(st.integers(0, MAX_DELAY_MS))
            events.append((row(f"p{pid}", nr, clock), clock + delay))
    return events


@given(workloads())
def test_every_event_is_delivered_once_and_in_order(events: list[tuple[Row, int]]) -> None:
    view = InMemoryTagView()
    query = tag_query(
        view,
        now_ms=START_MS,
        eventual_consistency_delay=timedelta(milliseconds=ECD_MS),
        back_track_interval=timedelta(milliseconds=INTERVAL_MS),
        back_track_period=timedelta(milliseconds=PERIOD_MS),
        gap_timeout=timedelta(seconds=5),
    )
    pending = sorted(events, key=lambda e: e[1])
    delivered: dict[str, list[int]] = {}
    end = max(arrival for _, arrival in events) + ECD_MS + PERIOD_MS + 2 * INTERVAL_MS
    now = START_MS
    while now <= end:
        while pending and pending[0][1] <= now:
            view.add(pending.pop(0)[0])
        for _ in range(50):
            step = query.poll(at(now))
            for r in step.rows:
                delivered.setdefault(r.persistence_id, []).append(r.tag_pid_sequence_nr)
            if step.wait_ns > 0 or step.is_complete:
                break
        now += STEP_MS
    expected: dict[str, list[int]] = {}
    for r, _ in sorted(events, key=lambda e: e[0].tag_pid_sequence_nr):
        expected.setdefault(r.persistence_id, []).append(r.tag_pid_sequence_nr)
    assert delivered == expected
