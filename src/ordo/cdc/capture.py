"""The capture loop: peek a window of committed changes, publish it durably, then advance.

At least once from the source, exactly once into the change log: the source is advanced only after
the publisher's files are in place, and the publisher skips positions the log already holds, so a
crash anywhere in between neither loses nor repeats a change. Each table's current schema is
registered before its changes are published; an incompatible change stops the capture (nothing is
published or advanced) until an operator accepts the new version. Each change is then published
naming the version it was written under (`Capture._named`), the older one for changes made
before the `ALTER TABLE`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ordo.cdc.change import mutation_problems
from ordo.cdc.change_rows import ChangeRows, mutation_from_values
from ordo.cdc.ports import ChangeSource, SchemaVersion
from ordo.cdc.publisher import Publisher, PublishReceipt
from ordo.cdc.schema import TableSchema
from ordo.cdc.schema_registry import SchemaRegistry
from ordo.clock import Clock, clock_or_system
from ordo.errors import StorageUnavailableError
from ordo.reconnection import Reconnection, is_outage
from ordo.settings.cdc import CaptureSettings
from ordo.stopping import Stop, stops_waits_on

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedWindow:
    """What one `capture_once` published: its mutations, and whether the source has more."""

    size: int
    has_more: bool


@dataclass(slots=True, kw_only=True)
class CaptureTotals:
    """What a capture run published: windows, mutations per table, duplicates skipped."""

    windows: int = 0
    published: Counter[str] = field(default_factory=Counter)
    skipped: int = 0
    up_to: int | None = None
    """The source position (inclusive) the capture advanced to last."""


class Capture:
    """Moves committed changes of one source into the change log (one thread; not thread-safe)."""

    def __init__(
        self,
        source: ChangeSource,
        publisher: Publisher,
        registry: SchemaRegistry,
        *,
        settings: CaptureSettings | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.source, self.publisher, self.registry = source, publisher, registry
        self.settings = CaptureSettings.or_default(settings)
        self._clock = clock_or_system(clock)
        self._last_publish_ns = self._clock.now_ns()

    def register_schemas(
        self, written: Sequence[TableSchema] = ()
    ) -> dict[str, Sequence[SchemaVersion]]:
        """Register the source's current schemas; raises IncompatibleSchemaError when blocked.

        The `written` ones of a window (`CapturedWindow.written`) go first, oldest first, as
        they came before the catalog's current ones (`SchemaRegistry.register_written`).
        Returns each table's accepted versions, oldest first, the current one last.
        """
        for schema in written:
            self.registry.register_written(schema)
        return {
            schema.table: self.registry.register_accepted(schema)
            for schema in self.source.schemas()
        }

    def publish_snapshot(self, table: str) -> PublishReceipt:
        """Publish the table's current rows (READ messages), named with its current schema.

        The rows are read whole first (`read_snapshot`), so nothing is published of a snapshot
        that could not be read.
        """
        return self.publisher.publish_rows(self.read_snapshot(table))

    def read_snapshot(self, table: str) -> ChangeRows:
        """The table's current rows, named with its current schema (what `publish_snapshot` takes).

        Apart from the publish so that a command can stop the read (it may wait for a lock) at
        once and let the publish, once begun, end (`ordo.cli.cdc_capture`). A lost session
        (StorageUnavailableError) is retried as `run` retries a window, for up to
        `settings.reconnect_timeout`: an attempt that lost its session read nothing that is
        kept, and the next reads the table again (a new snapshot segment). Then the error is
        raised, and nothing of the snapshot was published.
        """
        reconnection = Reconnection(give_up_after=self.settings.reconnect_timeout)
        while True:
            try:
                versions = self.register_schemas()
                rows = ChangeRows.from_mutations(list(self.source.snapshot(table)))
            except StorageUnavailableError as exc:
                self._wait_to_retry(exc, reconnection, f"snapshot of {table!r}", time.sleep)
                continue
            self._say_if_back(reconnection)
            return self._named(rows, versions)

    def _named(
        self, rows: ChangeRows, accepted: Mapping[str, Sequence[SchemaVersion]]
    ) -> ChangeRows:
        """`rows`, each naming the schema id of the version it was written under.

        That is its table's current version (the last `accepted` one), unless the table's
        accepted history holds an incompatible change (a dropped or retyped column an operator
        accepted): a change written before it fits only the older version, and named with the
        newer one the materializer would dead-letter it. Rows of such a table are checked
        against the versions that end an incompatible step, newest first, and named with the
        first they fit (the current one if none: the materializer then says why). Tables the
        source does not report keep what the row names.
        """
        eras = {table: _eras(versions) for table, versions in accepted.items()}
        ids: list[int | None] = []
        for index, (table, named) in enumerate(
            zip(rows.column("table"), rows.column("schema_id"), strict=True)
        ):
            versions = eras.get(table)
            if versions is None:
                ids.append(named)
            elif len(versions) == 1:
                ids.append(versions[0].schema_id)
            else:
                mutation = mutation_from_values(rows.values(index))
                fitting = (v for v in versions if not mutation_problems(mutation, v.schema))
                ids.append(next(fitting, versions[0]).schema_id)
        return rows.replaced("schema_id", ids)

    def capture_once(self, totals: CaptureTotals, *, flush: bool = False) -> PublishedWindow | None:
        """Publish one window if it is full, the flush interval passed, or `flush`.

        Returns what was published, or None when the window is still filling (nothing was
        published or advanced).
        """
        window = self.source.peek(max_changes=self.settings.max_changes)
        interval_ns = int(self.settings.flush_interval.total_seconds() * 1e9)
        is_due = self._clock.now_ns() - self._last_publish_ns >= interval_ns
        size = len(window.rows)
        if not (window.has_more or flush or is_due):
            return None
        # per publish, not per poll: it reads the catalog
        versions = self.register_schemas(window.written)
        rows = self._named(window.rows, versions)
        receipt = self.publisher.publish_rows(rows)
        self.source.advance(up_to=window.up_to)
        self._last_publish_ns = self._clock.now_ns()
        totals.windows += 1
        totals.published.update(receipt.published)
        totals.skipped += receipt.skipped
        totals.up_to = window.up_to
        if size:
            logger.info(
                "published source=%s mutations=%d skipped=%d up_to=%d",
                self.source.name,
                size,
                receipt.skipped,
                window.up_to,
            )
        return PublishedWindow(size=size, has_more=window.has_more)

    def run(
        self,
        *,
        stop: Stop | None = None,
        until_idle: bool = False,
        on_publish: Callable[[CaptureTotals], None] | None = None,
    ) -> CaptureTotals:
        """Capture until `stop` is set; with `until_idle`, until a window comes back empty.

        `on_publish` sees the running totals after each window that published changes (a
        long capture's progress).

        A StorageUnavailableError (the source's or the journal's session was lost: a restart,
        a failover, pg_terminate_backend) is logged as a WARNING and the window captured again
        after a bounded backoff (`Reconnection`), for up to `settings.reconnect_timeout` after
        the loss; then it is raised. The window is peeked again from the source's confirmed
        position and the publisher skips what it published before the loss: nothing is lost
        or repeated. Other errors (a dropped slot, another capture holding the slot's lock
        when the source reconnects: AlreadyRunningError, a server that refuses the URL:
        StorageAccessError, a source whose log went back, as after a failover to a standby
        that had not received everything: SourceRewoundError) end the run at once.

        `stop` also ends a wait for a pooled connection (`ordo.stopping.stops_waits_on`), such
        as a window's schema registration on a PostgreSQL journal that stopped answering: a
        command's Ctrl-C flag was held for the pool's timeout (30 s). The wait looks at `stop`
        between short slices, rather than being raised into, and ends as StorageUnavailableError
        before the window is published or advanced: nothing is left half done, and the run ends
        without a retry.
        """
        stop = stop or threading.Event()
        totals = CaptureTotals()
        reconnection = Reconnection(give_up_after=self.settings.reconnect_timeout)
        with stops_waits_on(stop):
            while not stop.is_set():
                try:
                    published = self.capture_once(totals, flush=until_idle)
                except StorageUnavailableError as exc:
                    if stop.is_set():
                        break  # what the stop cut short, or lost with it: no retry to warn of
                    self._wait_to_retry(exc, reconnection, "capture", stop.wait)
                    continue
                self._say_if_back(reconnection)
                if published is not None and published.size and on_publish is not None:
                    on_publish(totals)
                if published is not None and published.has_more:
                    continue  # a backlog: read on at once
                if until_idle and published is not None:
                    break  # the source held nothing more when it was read
                stop.wait(self.settings.poll_interval.total_seconds())
        return totals

    def _wait_to_retry(
        self,
        exc: StorageUnavailableError,
        reconnection: Reconnection,
        what: str,
        wait: Callable[[float], object],
    ) -> None:
        """Warn of a lost session and `wait` out the backoff; raise `exc` once it is exhausted.

        `what` names the step that failed in the warning ("capture", "snapshot of 'items'").
        A server that refuses the URL (StorageAccessError, no outage: `is_outage`) is raised at
        once: no retry mends it, and retrying only delayed the error by the whole reconnect
        timeout.
        """
        if not is_outage(exc):
            raise exc
        delay = reconnection.failed()
        if reconnection.exhausted:
            raise exc
        logger.warning(
            "%s unavailable, retrying in %.1f s (attempt %d, for up to %g s after the "
            "loss): source=%s error=%s",
            what,
            delay,
            reconnection.attempts,
            self.settings.reconnect_timeout.total_seconds(),
            self.source.name,
            exc,
        )
        wait(delay)

    def _say_if_back(self, reconnection: Reconnection) -> None:
        """Say that the capture goes on, once a window went through after a loss."""
        if reconnection.attempts:
            lasted = reconnection.succeeded()
            logger.info("capture reconnected after %.1f s: source=%s", lasted, self.source.name)


def _eras(accepted: Sequence[SchemaVersion]) -> Sequence[SchemaVersion]:
    """The current (last `accepted`) version, then each older one the next could not read.

    Newest first. A change that fits a version fits every compatible later one, so only the
    versions before an incompatible step can be what an older change was written under.
    """
    eras = [accepted[-1]]
    for older, newer in zip(reversed(accepted[:-1]), reversed(accepted[1:]), strict=True):
        if older.schema.incompatibilities(newer.schema):
            eras.append(older)
    return eras
