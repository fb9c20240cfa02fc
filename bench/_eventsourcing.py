"""The eventsourcing library's side of bench/append.py and bench/query.py.

Imported by the bench scripts; running it directly does nothing (`make bench` runs every
bench/*.py file).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event
from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder
from eventsourcing.sqlite import SQLiteApplicationRecorder

from _workload import PERSISTENCE_IDS, payload_bytes

LIBRARIES = ("ordo", "eventsourcing", "psycopg")
"""The libraries whose versions the comparisons with eventsourcing report."""


class Order(Aggregate):
    @event("Placed")
    def __init__(
        self, order_id: str, amount: int, currency: str, items: list[dict[str, object]]
    ) -> None:
        self.lines = 1

    @event("LineAdded")
    def add_line(
        self, order_id: str, amount: int, currency: str, items: list[dict[str, object]]
    ) -> None:
        self.lines += 1


class Orders(Application):  # type: ignore[type-arg]
    pass


@contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables for the duration of the block (eventsourcing reads them)."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


@contextmanager
def eventsourcing_app(env: Mapping[str, str]) -> Iterator[Orders]:
    """An Orders application on the database that the persistence variables `env` name."""
    with environment(env):
        app = Orders()  # the application reads os.environ here, and only here
    try:
        yield app
    finally:
        app.close()


def events_table(app: Orders) -> str:
    recorder = app.recorder
    if isinstance(recorder, SQLiteApplicationRecorder | PostgresApplicationRecorder):
        return recorder.events_table_name
    msg = f"unexpected eventsourcing recorder {type(recorder).__name__}"
    raise TypeError(msg)


def stored_event_batches(appends: Iterable[range]) -> Iterator[list[StoredEvent]]:
    """The StoredEvents of each append, as the app would store Order.LineAdded events.

    Append k goes to aggregate k % PERSISTENCE_IDS; event i carries payload(i).
    """
    ids = [uuid.uuid4() for _ in range(PERSISTENCE_IDS)]
    versions = [0] * PERSISTENCE_IDS
    topic = f"{Order.__module__}:{Order.__qualname__}.LineAdded"  # what the app would store
    for k, numbers in enumerate(appends):
        slot = k % PERSISTENCE_IDS
        stored = []
        for i in numbers:
            versions[slot] += 1
            stored.append(StoredEvent(ids[slot], versions[slot], topic, payload_bytes(i)))
        yield stored
