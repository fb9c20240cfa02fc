"""Opening a change source from a URL: SQLite (change triggers) or PostgreSQL (wal2json slot)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, closing, contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from ordo.cdc.ports import ChangeSource, SourceStatus
from ordo.cdc.schema import TableSchema
from ordo.errors import ConfigurationError
from ordo.storage.location import Location, SQLiteLocation, parse_location
from ordo.storage.lock_file import exclusive_lock

if TYPE_CHECKING:
    from ordo.storage.parquet import ParquetChangeLog
    from ordo.storage.postgres.change_segment import SegmentReplica

DEFAULT_SLOT = "ordo_cdc"


@contextmanager
def change_source_at(
    url: str,
    tables: Sequence[str],
    *,
    slot: str = DEFAULT_SLOT,
    log: ParquetChangeLog | None = None,
) -> Iterator[ChangeSource]:
    """The source database at `url`, held and prepared to capture `tables` (`held_change_source`).

    Preparing is idempotent: SQLite gets its change table and triggers (re)installed, PostgreSQL
    gets the logical replication slot `slot` created unless it exists (PostgreSQL keeps WAL for
    it from then on, until the capture advances it or the slot is dropped).
    """
    with held_change_source(url, tables, slot=slot, log=log) as prepare:
        yield prepare()


@contextmanager
def held_change_source(
    url: str,
    tables: Sequence[str],
    *,
    slot: str = DEFAULT_SLOT,
    log: ParquetChangeLog | None = None,
) -> Iterator[Callable[[], ChangeSource]]:
    """Hold the source at `url` for a capture of `tables`, and how to prepare it when ready.

    The source is held for the block: a second capture of it (the same SQLite file, or the same
    slot) is refused with AlreadyRunningError, as two would publish each change twice. An SQLite
    file is held by the lock file `<file>-ordo-capture.lock` next to it (a StorageError names it
    when it cannot be made); a slot by an advisory lock of the capture's session, taken here and
    again by each new session after a lost one. Nothing of the source is prepared before the
    returned callable is called (once), so `ordo cdc capture` holds the source before it opens
    its journal and registers schemas, which a refused capture then leaves as they were, and
    prepares it after. The source is closed when the block ends.

    `log` is the change log the capture publishes into: a PostgreSQL capture whose log holds
    files an earlier ordo published from the server under the slot's name goes on under it
    (`ordo.storage.postgres.change_segment`); without one it publishes under a new segment.
    """
    location = _capture_location(url, tables, slot)
    if isinstance(location, SQLiteLocation):
        from ordo.storage.sqlite.change_source import SQLiteChangeSource

        lock = Path(f"{location.path}-ordo-capture.lock")
        with (
            exclusive_lock(lock, f"a capture of {location.path} is already running"),
            ExitStack() as opened,
        ):

            def install() -> ChangeSource:
                sqlite = opened.enter_context(closing(SQLiteChangeSource(location.path, tables)))
                sqlite.install()
                return sqlite

            yield install
        return
    from ordo.storage.postgres.change_source import PostgresChangeSource

    with PostgresChangeSource(
        location.dsn,
        slot=slot,
        tables=tables,
        exclusive=True,
        published_by=_published_by(log, tables),
    ) as postgres:
        postgres.open()  # its session takes the lock, before anything else is done

        def create() -> ChangeSource:
            postgres.create()
            return postgres

        yield create


def check_change_source(
    url: str, tables: Sequence[str], *, slot: str = DEFAULT_SLOT
) -> list[TableSchema]:
    """The schemas of `tables`; refuse a source that `change_source_at` could not capture.

    A capture checks its source so before it opens its destinations, and prepares the source
    only once they are open and the schemas registered: a bad source leaves no journal behind,
    and a destination that cannot be opened, or a schema change that waits for an operator,
    leaves no triggers or slot in the user's database.
    """
    location = _capture_location(url, tables, slot)
    if isinstance(location, SQLiteLocation):
        from ordo.storage.sqlite.change_source import check_capturable

        return check_capturable(location.path, tables)
    from ordo.storage.postgres.change_source import PostgresChangeSource

    with PostgresChangeSource(location.dsn, slot=slot, tables=tables) as postgres:
        return postgres.check()


def source_status_at(
    url: str,
    tables: Sequence[str],
    *,
    slot: str = DEFAULT_SLOT,
    log: ParquetChangeLog | None = None,
) -> SourceStatus:
    """The capture's progress in the source at `url`, read only.

    Unlike `change_source_at` it prepares nothing: a status must not install triggers in an
    SQLite file, nor create a slot (which makes PostgreSQL keep WAL from then on). Its
    `segment` is the one a capture into `log` publishes under, as `held_change_source` says.
    """
    location = _source_location(url, slot)
    if isinstance(location, SQLiteLocation):
        from ordo.storage.sqlite.change_source import read_status

        return read_status(location.path, tables)
    from ordo.storage.postgres.change_source import PostgresChangeSource

    with PostgresChangeSource(
        location.dsn, slot=slot, tables=tables, published_by=_published_by(log, tables)
    ) as postgres:
        return postgres.status()


def capture_slots_at(url: str, *, log: ParquetChangeLog | None = None) -> list[SourceStatus]:
    """The captures a database knows of: its wal2json slots on PostgreSQL.

    None on SQLite, whose change tables live in each source file (name one with `--source`).
    A slot does not know its tables: the segment of each is the one a capture of it into `log`
    publishes under, looked up in every table of `log`.
    """
    location = parse_location(url)
    if isinstance(location, SQLiteLocation):
        return []
    from ordo.storage.postgres.replication_slot import capture_slots

    tables = [] if log is None else log.tables()
    return capture_slots(location.dsn, _published_by(log, tables))


def _published_by(log: ParquetChangeLog | None, tables: Sequence[str]) -> SegmentReplica:
    """Which server published a segment into the logs of `tables` in `log` (none without one).

    What settles a PostgreSQL capture's segment (`ordo.storage.postgres.change_segment`).
    """
    from ordo.storage.parquet.segment_replica import segment_replica
    from ordo.storage.postgres.change_segment import no_change_log

    return no_change_log if log is None else partial(segment_replica, log, tables)


def _capture_location(url: str, tables: Sequence[str], slot: str) -> Location:
    """`_source_location`, with at least one table to capture."""
    if not tables:
        msg = "name at least one table to capture (--table)"
        raise ConfigurationError(msg)
    return _source_location(url, slot)


def _source_location(url: str, slot: str) -> Location:
    """Where the source is; a slot named for an SQLite source (which has none) is refused."""
    location = parse_location(url, what="source")
    if isinstance(location, SQLiteLocation) and slot != DEFAULT_SLOT:
        msg = f"slot {slot!r}: an SQLite source has no replication slot (--slot is PostgreSQL's)"
        raise ConfigurationError(msg)
    return location
