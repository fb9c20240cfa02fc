"""How a tag writer logs an outage: one WARNING when it starts, one INFO when it ends.

The journal retries a failed tag write at every flush (`flush_interval`, 250 ms by default);
a WARNING per retry made about 1,200 identical lines per tag in a 5-minute outage.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from ordo.errors import StorageError
from ordo.types import Tag

OUTAGE_REMINDER = timedelta(minutes=1)
"""How often a WARNING recalls an outage that goes on, so that a long one is still seen."""


class OutageLog:
    """Logs the outages of one tag's writes to `logger`.

    The first failed write of an outage is a WARNING, each further one a DEBUG line, but for a
    WARNING reminder (how long the writes have failed, how many events wait) at most once per
    `OUTAGE_REMINDER`; the first write that works again is an INFO line. Per tag, as each tag's
    writes fail and resume on their own (a batch of one tag may be written while another
    tag's retry fails), and the INFO names the tag whose events are written again. Not
    thread-safe: its tag writer calls it under the lock that orders that tag's writes.
    """

    def __init__(self, tag: Tag, logger: logging.Logger) -> None:
        self._tag = tag
        self._logger = logger
        self._attempts = 0  # failed attempts of the current outage (0: none)
        self._since = 0.0  # time.monotonic() of its first failure
        self._warned = 0.0  # time.monotonic() of its last WARNING

    def failed(self, error: StorageError, *, buffered: int) -> None:
        """A write failed and will be retried; `buffered` events wait to be written."""
        now = time.monotonic()
        self._attempts += 1
        if self._attempts == 1:
            self._since = self._warned = now
            self._logger.warning("tag write failed, will retry: tag=%s error=%s", self._tag, error)
        elif now - self._warned >= OUTAGE_REMINDER.total_seconds():
            self._warned = now
            self._logger.warning(
                "tag writes still failing after %.0f s, will retry: tag=%s failed_attempts=%d "
                "buffered=%d error=%s",
                now - self._since,
                self._tag,
                self._attempts,
                buffered,
                error,
            )
        else:
            self._logger.debug(
                "tag write failed again, will retry: tag=%s failed_attempts=%d error=%s",
                self._tag,
                self._attempts,
                error,
            )

    def succeeded(self) -> None:
        """A write worked: the end of the outage, if there was one."""
        if self._attempts:
            self._logger.info(
                "tag writes resumed after %.1f s (%d failed attempts): tag=%s",
                time.monotonic() - self._since,
                self._attempts,
                self._tag,
            )
            self._attempts = 0
