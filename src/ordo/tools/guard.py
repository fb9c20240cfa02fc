"""The active-writer guard: reconciliation and cleanup refuse ids that live writers use.

Seed 000: reconciliation "can only be run while the application is offline but per
persistence id operations can be used if it is known that the persistence id is not
running". Every open Journal holds a lease (ordo.journal.lease) renewed every few seconds;
a lease renewed within `writer_lease_timeout` is live. An id is in use when a live lease lists
it, or when a live writer appended any of its events.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from ordo.clock import Clock, clock_or_system
from ordo.errors import ActiveWriterError
from ordo.settings import OperationsSettings
from ordo.settings.loading import flag
from ordo.tools.ports import OperationsStore
from ordo.types import PersistenceId

logger = logging.getLogger(__name__)

EVERY_PERSISTENCE_ID = "*"
"""The key of ActiveWriterError.writers when an operation touches the whole journal."""


class WriterGuard:
    """Checks the writer leases before an operation changes anything. Thread-safe."""

    def __init__(
        self,
        operations: OperationsStore,
        *,
        settings: OperationsSettings | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._operations = operations
        self._settings = OperationsSettings.or_default(settings)
        self._clock = clock_or_system(clock)

    def check(
        self,
        operation: str,
        persistence_ids: Sequence[PersistenceId] | None,
        *,
        force: bool,
    ) -> Mapping[str, tuple[str, ...]]:
        """Refuse (ActiveWriterError) when live writers use the ids; None means every id.

        With `force` the operation goes on: the writers it overrides are logged at WARNING
        and returned, so that the caller can report them. Returns {} when no writer is live.
        ConfigurationError unless `force` is a bool: "false" is true and forced the operation.
        """
        flag("force", force)
        since_ms = self._clock.now_ns() // 1_000_000 - self._settings.writer_lease_timeout_ms
        covering: dict[str, tuple[str, ...]]
        if persistence_ids is None:
            live = self._operations.live_writers(since_ms=since_ms)
            covering = {EVERY_PERSISTENCE_ID: tuple(w.writer_uuid for w in live)} if live else {}
        else:
            found = self._operations.writers_covering(persistence_ids, since_ms=since_ms)
            covering = {str(pid): writers for pid, writers in found.items()}
        if not covering:
            return {}
        if not force:
            raise ActiveWriterError(operation=operation, writers=covering)
        logger.warning(
            "forced past live writers: operation=%s persistence_ids=%s",
            operation,
            ",".join(covering),
        )
        return covering
