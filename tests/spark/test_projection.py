"""Spark projections: the handler's table equals the fold of the journal, exactly once."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from datetime import timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ordo import EventsByTagSettings, NewEvent, open_journal
from ordo.spark import ProjectionSpec, projection
from ordo.spark.demo import count_order_events
from ordo.time import format_first_time_bucket

pytestmark = pytest.mark.spark

FIRST = format_first_time_bucket(time.time_ns() // 1_000_000 - 3_600_000)
WRITE = EventsByTagSettings(first_time_bucket=FIRST, flush_interval=timedelta(0))


def _append(url: str, start: int, count_: int) -> None:
    with open_journal(url, settings=WRITE) as journal:
        for i in range(start, start + count_):
            journal.append(f"order-{i % 9}", [NewEvent.of({"i": i}, tags=["order"])])


def _totals(path: Path) -> dict[str, int]:
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute("SELECT pid, events, last_nr, misordered FROM order_totals").fetchall()
    assert all(events == last and misordered == 0 for _, events, last, misordered in rows)
    return {pid: events for pid, events, _, _ in rows}


def _run(spark: SparkSession, url: str, checkpoint: Path, segments: str = "3") -> None:
    spec = ProjectionSpec(processor="totals", sink=url, handler=count_order_events)
    query = projection(
        spark,
        spec,
        source_options={
            "journal": url,
            "tag": "order",
            "firstTimeBucket": FIRST,
            "eventualConsistencyDelayMs": "0",
            "segments": segments,
            "maxEventsPerTrigger": "40",
        },
        checkpoint=str(checkpoint),
        available_now=True,
    )
    query.awaitTermination(180)
    assert query.exception() is None


def test_a_projection_applies_every_event_once_across_restarts_and_replays(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = tmp_path / "journal.db"
    url = f"sqlite:///{path}"
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(
            "CREATE TABLE order_totals (pid TEXT PRIMARY KEY, events BIGINT NOT NULL, "
            "last_nr BIGINT NOT NULL, misordered BIGINT NOT NULL)"
        )
    _append(url, 0, 90)
    _run(spark, url, tmp_path / "checkpoint")
    assert _totals(path) == {f"order-{p}": 10 for p in range(9)}
    _append(url, 90, 45)
    _run(spark, url, tmp_path / "checkpoint", segments="2")  # resumed from the checkpoint
    assert _totals(path) == {f"order-{p}": 15 for p in range(9)}
    _run(spark, url, tmp_path / "fresh-checkpoint", segments="4")  # replays every batch
    assert _totals(path) == {f"order-{p}": 15 for p in range(9)}
