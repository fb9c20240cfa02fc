"""Opening a change source from a URL: SQLite (change triggers) or PostgreSQL (wal2json slot)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path

from ordo.cdc.ports import ChangeSource, SourceStatus
from ordo.cdc.schema import TableSchema
from ordo.errors import ConfigurationError
from ordo.storage.location import Location, SQLiteLocation, parse_location
from ordo.storage.lock_file import exclusive_lock

DEFAULT_SLOT = "ordo_cdc"


@contextmanager
def change_source_at(
    url: str, tables: Sequence[str], *, slot: str = DEFAULT_SLOT, held: bool = False
) -> Iterator[ChangeSource]:
    """The source database at `url`, ready to capture `tables`; closed when the block ends.

    Preparing is idempotent: SQLite gets its change table and triggers (re)installed, PostgreSQL
    gets the logical replication slot `slot` created unless it exists (PostgreSQL keeps WAL for
    it from then on, until the capture advances it or the slot is dropped). The source is held
    for the block, before it is prepared: a second capture of it (the same SQLite file, or the
    same slot) is refused with AlreadyRunningError, as two would publish each change twice. An
    SQLite file is held by its `capture_lock`, or by the caller's with `held`; a slot by an
    advisory lock of the source's session, taken again by each new session after a lost one.
    """
    location = _capture_location(url, tables, slot)
    if isinstance(location, SQLiteLocation):
        from ordo.storage.sqlite.change_source import SQLiteChangeSource

        with nullcontext() if held else capture_lock(url, tables, slot=slot):
            sqlite = SQLiteChangeSource(location.path, tables)
            try:
                sqlite.install()
                yield sqlite
            finally:
                sqlite.close()
        return
    from ordo.storage.postgres.change_source import PostgresChangeSource

    with PostgresChangeSource(location.dsn, slot=slot, tables=tables, exclusive=True) as postgres:
        postgres.create()  # its first session takes the lock, before the slot is created
        yield postgres


@contextmanager
def capture_lock(url: str, tables: Sequence[str], *, slot: str = DEFAULT_SLOT) -> Iterator[None]:
    """Hold an SQLite source for a capture: the lock file `<file>-ordo-capture.lock` next to it.

    AlreadyRunningError while another capture holds it, a StorageError naming the lock file when
    it cannot be made. `ordo cdc capture` takes it before it opens its journal and registers
    schemas, so a refused capture leaves neither behind (`change_source_at(held=True)`). A
    PostgreSQL slot's lock is its capture session's: `change_source_at` takes it, and this holds
    nothing.
    """
    location = _capture_location(url, tables, slot)
    if not isinstance(location, SQLiteLocation):
        yield
        return
    lock = Path(f"{location.path}-ordo-capture.lock")
    with exclusive_lock(lock, f"a capture of {location.path} is already running"):
        yield


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


def source_status_at(url: str, tables: Sequence[str], *, slot: str = DEFAULT_SLOT) -> SourceStatus:
    """The capture's progress in the source at `url`, read only.

    Unlike `change_source_at` it prepares nothing: a status must not install triggers in an
    SQLite file, nor create a slot (which makes PostgreSQL keep WAL from then on).
    """
    location = _source_location(url, slot)
    if isinstance(location, SQLiteLocation):
        from ordo.storage.sqlite.change_source import read_status

        return read_status(location.path, tables)
    from ordo.storage.postgres.change_source import PostgresChangeSource

    with PostgresChangeSource(location.dsn, slot=slot, tables=tables) as postgres:
        return postgres.status()


def capture_slots_at(url: str) -> list[SourceStatus]:
    """The captures a database knows of: its wal2json slots on PostgreSQL.

    None on SQLite, whose change tables live in each source file (name one with `--source`).
    """
    location = parse_location(url)
    if isinstance(location, SQLiteLocation):
        return []
    from ordo.storage.postgres.replication_slot import capture_slots

    return capture_slots(location.dsn)


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
