"""The lease of a running projection: what `ordo processors reset` refuses to reset under.

A projection holds no claim on its segments (it dedupes by its positions and resumes from its
checkpoint), so a reset could not tell that it runs: it cleared the positions under the
running query, whose next batches then applied events again, and the tokens it had reset
came back with the next micro-batch. The driver therefore holds a lease on the processor in
the projection's databases (its sink, and the journal when its tokens are there): written
before the stream starts, renewed every LEASE_INTERVAL by a background thread while the query
is active, and deleted once the query has ended (stopped, finished or failed). A driver that
crashes leaves a lease that stops being renewed: a reset refuses it only for the claim timeout
(PROJECTION_LEASE_TIMEOUT at the least), as it refuses a crashed tracking processor's claims.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Sequence
from contextlib import ExitStack
from datetime import timedelta

from pyspark.errors import StreamingQueryException
from pyspark.sql.streaming.query import StreamingQuery

from ordo.errors import StorageError
from ordo.processing.ports import PROJECTION_LEASE_TIMEOUT, TokenStore
from ordo.storage.open import OpenMode, stores_at

logger = logging.getLogger(__name__)

LEASE_INTERVAL = PROJECTION_LEASE_TIMEOUT / 5
"""How often a running projection renews its lease (2 s): well within PROJECTION_LEASE_TIMEOUT,
the least time after which a reset takes a lease for a crashed driver's."""


class ProjectionLease:
    """The lease of one run of a projection, in one or more databases. Thread-safe.

    `hold(query)` starts the heartbeat thread, which releases the lease once the query has
    ended; `release()` does so at once (ProjectionQuery calls it when the query is stopped or
    awaited to its end, so that a reset right after is not refused). A renewal that fails is
    logged and retried at the next beat.
    """

    def __init__(self, processor: str, databases: Sequence[tuple[str, OpenMode]]) -> None:
        """Open `databases` (URL and mode each) and write the lease in each of them.

        The stores stay open until the lease is released. Raises StorageError when a first
        lease cannot be written; the stores are closed then.
        """
        self.processor = processor
        self.owner = f"spark-driver-{uuid.uuid4()}"
        self._lock = threading.Lock()
        self._is_released = False
        self._opened = ExitStack()
        try:
            self._tokens: list[TokenStore] = [
                self._opened.enter_context(stores_at(url, mode=mode)).tokens
                for url, mode in databases
            ]
            self._renew()
        except BaseException:
            self._opened.close()
            raise
        logger.info("projection lease taken: processor=%s owner=%s", processor, self.owner)

    def hold(self, query: StreamingQuery) -> None:
        """Renew the lease in a daemon thread while `query` is active, then release it."""
        threading.Thread(
            target=self._beat, args=(query,), name="ordo-projection-lease", daemon=True
        ).start()

    def release(self) -> None:
        """Delete the lease and close the stores (once; a failure is logged: it expires)."""
        with self._lock:
            if self._is_released:
                return
            self._is_released = True
            try:
                for tokens in self._tokens:
                    tokens.release_projection_lease(self.processor, self.owner)
            except StorageError as exc:
                logger.warning(
                    "projection lease not released, it expires after the claim timeout: "
                    "processor=%s owner=%s error=%s",
                    self.processor,
                    self.owner,
                    exc,
                )
            finally:
                self._opened.close()
        logger.info("projection lease released: processor=%s owner=%s", self.processor, self.owner)

    def _beat(self, query: StreamingQuery) -> None:
        interval_s = LEASE_INTERVAL // timedelta(seconds=1)
        try:
            while not query.awaitTermination(interval_s):
                with self._lock:
                    if self._is_released:
                        return
                    try:
                        self._renew()
                    except StorageError as exc:
                        logger.warning(
                            "projection lease heartbeat failed, will retry: processor=%s error=%s",
                            self.processor,
                            exc,
                        )
        except StreamingQueryException:
            pass  # the query failed: whoever awaits it is told; the lease goes all the same
        self.release()

    def _renew(self) -> None:
        now_ms = time.time_ns() // 1_000_000
        for tokens in self._tokens:
            tokens.renew_projection_lease(self.processor, self.owner, now_ms=now_ms)


class ProjectionQuery(StreamingQuery):
    """A projection's StreamingQuery, which releases the projection's lease once it has ended.

    `stop()` and an `awaitTermination()` that sees the end release it before they return, so
    that `ordo processors reset` right after is not refused (the heartbeat thread would
    release it only at its next beat). Not picklable (it holds the query's Java object).
    """

    def __init__(self, query: StreamingQuery, lease: ProjectionLease) -> None:
        super().__init__(query._jsq)
        self._lease = lease

    def stop(self) -> None:
        """Stop the query, then release its lease."""
        try:
            super().stop()
        finally:
            self._lease.release()

    def awaitTermination(self, timeout: int | None = None) -> bool | None:
        """Spark's awaitTermination; once the query has ended its lease is released."""
        try:
            ended = super().awaitTermination(timeout)
        except StreamingQueryException:
            self._lease.release()
            raise
        if ended is not False:
            self._lease.release()
        return ended
