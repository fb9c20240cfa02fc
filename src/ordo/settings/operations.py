"""Settings of the operations tools: reconciliation, cleanup, expiry and verification."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from ordo.errors import ConfigurationError
from ordo.settings.durations import longest_durations, shown
from ordo.settings.loading import LoadableSettings, integer_in

WRITER_HEARTBEAT_INTERVAL = timedelta(seconds=5)
"""How often an open Journal renews its writer lease (a background thread, not the appends)."""
WRITER_LEASE_DEADLINE = 3 * WRITER_HEARTBEAT_INTERVAL
"""How long a Journal appends after its lease was last renewed: then it refuses appends
(WriterLeaseLostError). Two missed heartbeats are ridden out. `writer_lease_timeout` must be
longer, and longer by the clock skew between machines (the default 30 s is): then no tool takes
a lease for a crashed writer's while its journal may still append."""
SPARK_KEY_PARTITIONS = 4
"""The pieces the Spark jobs of `reconcile rebuild --all` and `verify` read keys in."""
MAX_SPARK_KEY_PARTITIONS = 1024
"""The most pieces such a read is split into: finding each piece's bounds is a query of its own,
and beyond the executors' cores more pieces only add per-task cost."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class OperationsSettings(LoadableSettings):
    """How the operations tools decide that a writer is alive and how much they change at once.

    A journal renews its lease every WRITER_HEARTBEAT_INTERVAL; a lease not renewed for
    `writer_lease_timeout` belongs to a writer that stopped without closing (a crash), and no
    longer blocks reconciliation. A journal refuses appends once its lease has gone unrenewed
    for WRITER_LEASE_DEADLINE (15 s), so a timeout above that plus the clock skew between the
    machines (the default 30 s) never lets a tool change what a live writer appends to; a
    timeout not above WRITER_LEASE_DEADLINE is refused. Every duration is at most
    LONGEST_DURATION.
    """

    TOML_TABLE = "operations"

    writer_lease_timeout: timedelta = timedelta(seconds=30)
    """A writer whose heartbeat is older than this is considered gone."""
    rows_per_batch: int = 1000
    """Rows per delete (expiry, cleanup) and per upsert (rebuilds): bounded transactions."""

    def __post_init__(self) -> None:
        integer_in("rows_per_batch", self.rows_per_batch, 1)
        if (
            not isinstance(self.writer_lease_timeout, timedelta)
            or self.writer_lease_timeout <= WRITER_LEASE_DEADLINE
        ):
            deadline = WRITER_LEASE_DEADLINE.total_seconds()
            msg = (
                f"writer_lease_timeout must be longer than {deadline:g}s (a journal appends "
                f"until its lease is {deadline:g}s old), got {shown(self.writer_lease_timeout)}"
            )
            raise ConfigurationError(msg, setting="writer_lease_timeout")
        longest_durations(self)

    @property
    def writer_lease_timeout_ms(self) -> int:
        """writer_lease_timeout in milliseconds (leases store epoch milliseconds)."""
        return self.writer_lease_timeout // timedelta(milliseconds=1)
