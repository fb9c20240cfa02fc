"""Waiting to reach a server again after losing a connection: a bounded, doubling backoff.

The CDC capture's connection and the tag listener's LISTEN connection are not pooled: when the
server ends their sessions (a restart, a failover, pg_terminate_backend), their loops open a new
one. They wait FIRST_DELAY before the first attempt and twice as long before each next one, at
most LONGEST_DELAY: a server that is down is not hammered, and one that is back is reached within
LONGEST_DELAY. The capture gives up after a while (an operator should hear of a long outage);
the listener never does, as queries poll meanwhile. Neither retries a server that refuses the
URL (StorageAccessError): that is no outage, and no attempt mends it (`is_outage`).
"""

from __future__ import annotations

import time
from datetime import timedelta

from ordo.errors import StorageAccessError, StorageUnavailableError

FIRST_DELAY = timedelta(milliseconds=100)
LONGEST_DELAY = timedelta(seconds=5)


def is_outage(error: BaseException) -> bool:
    """Whether a retry may mend `error`: the one rule of the code that rides out outages.

    An outage is StorageUnavailableError (a lost session, a server or file not reachable now,
    a transaction conflict, a database locked past the busy timeout), which a tracking
    processor and a capture retry. Its subclass StorageAccessError is not (a refused URL, a
    file that can be no journal), nor is any other StorageError: SchemaVersionError,
    StorageIntegrityError, and a plain StorageError, what the database refuses to do as asked
    (a table dropped or one this role may not use, corrupt data). A processor retried every
    StorageError for ever, a WARNING per claim interval, while it handled nothing.
    """
    return isinstance(error, StorageUnavailableError) and not isinstance(error, StorageAccessError)


class Reconnection:
    """One loop's outage: how long to wait before each attempt, and when to give up.

    `failed()` after each failed attempt, `succeeded()` after one that worked. Not thread-safe:
    the loop that reconnects owns it.
    """

    def __init__(self, *, give_up_after: timedelta | None = None) -> None:
        """`give_up_after`: how long after the loss attempts go on (None: until one works)."""
        self._give_up_after = give_up_after
        self._lost_at = 0.0
        self._delay = FIRST_DELAY
        self.attempts = 0
        """Failed attempts of the current outage (0 while connected)."""

    def failed(self) -> float:
        """Seconds to wait before the next attempt.

        Never past the deadline: the last attempt is made right at it.
        """
        if not self.attempts:
            self._lost_at = time.monotonic()
        self.attempts += 1
        delay = self._delay.total_seconds()
        self._delay = min(self._delay * 2, LONGEST_DELAY)
        return max(0.0, min(delay, self._left()))

    @property
    def exhausted(self) -> bool:
        """The outage has lasted `give_up_after`: the loop should fail rather than attempt."""
        return self.attempts > 0 and self._left() <= 0

    def succeeded(self) -> float:
        """End the outage; how many seconds it lasted (0 when there was none)."""
        lasted = time.monotonic() - self._lost_at if self.attempts else 0.0
        self._delay, self.attempts = FIRST_DELAY, 0
        return lasted

    def _left(self) -> float:
        """Seconds until the deadline of the current outage (infinite without one)."""
        if self._give_up_after is None:
            return float("inf")
        return self._lost_at + self._give_up_after.total_seconds() - time.monotonic()
