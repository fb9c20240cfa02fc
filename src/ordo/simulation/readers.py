"""Live queries that read while the writers write, restarted now and then from their offset."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ordo.errors import MissingTaggedEventError
from ordo.settings import EventsByTagSettings, QuerySettings
from ordo.storage.open import events_by_tag_at
from ordo.time import TimeUUID

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Delivery:
    """One delivered event, as the checker needs it."""

    run: int
    persistence_id: str
    tag_pid_sequence_nr: int
    offset_key: bytes
    delivered_ns: int


@dataclass(slots=True)
class QueryChain:
    """The runs of one consumer of one tag: each run resumes after the last delivered offset.

    Seed 001: a consumer stores the offset of what it processed and restarts from it; events
    with a greater offset may be delivered again, nothing it was promised may be missed.
    """

    tag: str
    deliveries: list[Delivery] = field(default_factory=list)
    starts: list[bytes | None] = field(default_factory=list)
    """The offset each run started after (None: from the first time bucket)."""
    distinct: set[tuple[str, int]] = field(default_factory=set)
    """(persistence id, tag pid sequence nr) delivered at least once: the progress measure."""
    error: MissingTaggedEventError | None = None
    """The seeds' loud failure that ended the chain: part of the verdict."""
    failure: Exception | None = None
    """Any other error that ended the chain (storage, a bug): the run stops and reports it."""


class QueryChainThread(threading.Thread):
    """Runs one QueryChain until stop(); restarts it `restarts` times at random moments."""

    def __init__(
        self,
        url: str,
        chain: QueryChain,
        *,
        settings: QuerySettings,
        events_by_tag: EventsByTagSettings,
        restarts: int,
        mean_run_s: float,
        rng: random.Random,
    ) -> None:
        super().__init__(name=f"ordo-query-{chain.tag}", daemon=True)
        self.chain = chain
        self._url = url
        self._settings = settings
        self._events_by_tag = events_by_tag
        self._restarts = restarts
        self._mean_run_s = mean_run_s
        self._rng = rng
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._close_current: Callable[[], None] | None = None

    def stop(self) -> None:
        """End the current run and the chain."""
        self._stopped.set()
        with self._lock:
            if self._close_current is not None:
                self._close_current()

    def run(self) -> None:
        """Read runs until stopped or an error ends the chain, which it keeps for the run.

        An error other than MissingTaggedEventError used to end the thread with a traceback
        and nothing else: the run waited out its patience for deliveries that could not come
        (for ever with a huge consistency delay), then counted them as lost.
        """
        try:
            self._read_runs()
        except Exception as exc:  # simulate() raises it in the main thread
            self.chain.failure = exc

    def _read_runs(self) -> None:
        offset: bytes | None = None
        with events_by_tag_at(
            self._url, settings=self._settings, events_by_tag=self._events_by_tag
        ) as queries:
            run = 0
            while not self._stopped.is_set():
                start = None if offset is None else TimeUUID.from_bytes(offset)
                stream = queries.live(self.chain.tag, start)
                self.chain.starts.append(offset)
                with self._lock:
                    self._close_current = stream.close
                if self._stopped.is_set():
                    stream.close()
                timer = None
                if run < self._restarts:
                    timer = threading.Timer(
                        self._rng.expovariate(1 / self._mean_run_s), stream.close
                    )
                    timer.start()
                try:
                    for envelope in stream:
                        self.chain.deliveries.append(
                            Delivery(
                                run,
                                envelope.persistence_id,
                                envelope.tag_pid_sequence_nr,
                                envelope.offset_key,
                                time.time_ns(),
                            )
                        )
                        self.chain.distinct.add(
                            (envelope.persistence_id, envelope.tag_pid_sequence_nr)
                        )
                        offset = envelope.offset_key
                except MissingTaggedEventError as exc:
                    logger.error("query failed: tag=%s error=%s", self.chain.tag, exc)
                    self.chain.error = exc
                    return
                finally:
                    if timer is not None:
                        timer.cancel()
                    stream.close()
                run += 1
