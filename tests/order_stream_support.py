"""What the `ordo_events_by_tag` Spark tests share: an "order" tag written at once, read from
an hour back."""

from __future__ import annotations

import time
from datetime import timedelta

from ordo import EventsByTagSettings, NewEvent, open_journal
from ordo.time import format_first_time_bucket

FIRST = format_first_time_bucket(time.time_ns() // 1_000_000 - 3_600_000)
WRITE = EventsByTagSettings(first_time_bucket=FIRST, flush_interval=timedelta(0))
OPTIONS = {"tag": "order", "firstTimeBucket": FIRST, "eventualConsistencyDelayMs": "0"}
"""The source's options for the tag (add `journal`), with no eventual-consistency delay."""


def append_orders(url: str, start: int, count: int) -> None:
    """Events `{"i": start}` .. of the tag, one append each, over seven persistence ids."""
    with open_journal(url, settings=WRITE) as journal:
        for i in range(start, start + count):
            journal.append(f"order-{i % 7}", [NewEvent.of({"i": i}, tags=["order"])])
