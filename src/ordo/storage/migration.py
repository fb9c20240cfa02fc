"""Versioned schema migrations: numbered SQL files shipped in each backend's package."""

from __future__ import annotations

import functools
import re
from collections.abc import Collection
from dataclasses import dataclass
from importlib import resources
from typing import Any, Protocol

from ordo.errors import SchemaVersionError, StorageAccessError

METADATA_TABLE = "ordo_metadata"
SCHEMA_VERSION_KEY = "schema_version"
BUCKET_SIZE_KEY = "bucket_size"
JOURNAL_ID_KEY = "journal_id"
"""A random UUID recorded by migration 8 (see its SQL): which journal a Spark offset is of."""
EXPIRED_BEFORE_KEY = "tag_views_expired_before"
"""The expiry horizon of every tag (epoch ms); `<key>:<tag>` holds one tag's (ordo.tools.ports
ExpiryHorizons). Key-value rows rather than a table: a horizon is a handful of numbers that only
the operations tools read, and older ordo versions ignore keys they do not know."""

_CREATED_TABLE = re.compile(
    r"^\s*CREATE TABLE (?:IF NOT EXISTS )?(\w+)", re.IGNORECASE | re.MULTILINE
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Migration:
    """One schema step: `version` is reached by running `statements` in order."""

    version: int
    name: str
    statements: tuple[str, ...]

    @property
    def tables(self) -> tuple[str, ...]:
        """The tables its statements create (the SQL comments before a statement aside)."""
        return tuple(m.group(1) for s in self.statements for m in _CREATED_TABLE.finditer(s))


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationReceipt:
    """What `ordo init` did: the version found before and the version now."""

    previous_version: int
    version: int

    @property
    def is_changed(self) -> bool:
        """Whether any migration ran."""
        return self.previous_version != self.version


@functools.cache
def load_migrations(package: str) -> tuple[Migration, ...]:
    """Read `<package>/migrations/NNNN_name.sql` files, ascending; statements split on `;`.

    Read once per process: every opening of stores asks for them, and a projection opens its
    sink in every task of every micro-batch.
    """
    found: list[Migration] = []
    for entry in resources.files(package).joinpath("migrations").iterdir():
        if not entry.name.endswith(".sql"):
            continue
        number, _, name = entry.name.removesuffix(".sql").partition("_")
        text = entry.read_text(encoding="utf-8")
        statements = tuple(s.strip() for s in text.split(";") if s.strip())
        found.append(Migration(version=int(number), name=name, statements=statements))
    return tuple(sorted(found, key=lambda m: m.version))


def stored_version(value: object) -> int:
    """The schema version a metadata table holds; StorageAccessError unless a number.

    Only ordo writes it, so anything else is a damaged journal or another program's table of
    the same name: refused as a journal cannot be opened, not misread as version 0. No retry
    mends it (nor `ordo init`, which reads it first) until someone repairs the table: as
    StorageUnavailableError it was an outage.
    """
    try:
        return int(str(value))
    except ValueError as exc:
        msg = f"the journal's {METADATA_TABLE} holds schema_version {value!r}, not a version number"
        raise StorageAccessError(msg) from exc


def pending(migrations: tuple[Migration, ...], current: int) -> tuple[Migration, ...]:
    """The migrations to run from `current`; SchemaVersionError if the schema is newer."""
    latest = migrations[-1].version if migrations else 0
    if current > latest:
        raise SchemaVersionError(found=current, supported=latest)
    return tuple(m for m in migrations if m.version > current)


def require_latest(package: str, current: int, *, upgradable: bool = False) -> None:
    """Refuse a schema at `current` that is not the latest of `package` (newer or older).

    What opening for reading checks instead of migrating: a status or a query must not change
    the database (an upgrade takes the write lock and alters tables under running writers).
    With `upgradable`, an older schema passes: the check of a database that a job will open
    for writing, and so upgrade, but only once Spark has started (a newer one failed there).
    """
    latest = load_migrations(package)[-1].version
    if current > latest or (current < latest and not upgradable):
        raise SchemaVersionError(found=current, supported=latest)


def finished(package: str, current: int) -> MigrationReceipt | None:
    """The receipt of a migration with nothing to do at `current`, or None if one is needed.

    Datastores ask this after a plain read of the version, before taking the lock that
    serializes migrations: on a journal that writers keep busy, opening stores must not wait
    for a write lock only to find the schema current.
    """
    if pending(load_migrations(package), current):
        return None
    return MigrationReceipt(previous_version=current, version=current)


@functools.cache
def ordo_table_names() -> frozenset[str]:
    """The tables ordo's migrations create (the same names on both backends), lower case."""
    return frozenset(
        table.lower()
        for migration in load_migrations("ordo.storage.sqlite")
        for table in migration.tables
    )


def refuse_foreign_tables(
    todo: tuple[Migration, ...], existing: Collection[str], *, where: str
) -> None:
    """StorageAccessError when a table `todo` creates is in `existing`: another program's.

    The migrations create their tables IF NOT EXISTS, so an application's `tokens` (its users'
    tokens) or `tag_views` was kept in place of ordo's: `ordo init` recorded the latest schema
    around it, and writers and processors failed later with "no such column", or wrote into
    the application's table where its columns happened to fit. No retry mends it until someone
    renames the table or gives ordo a database (or a PostgreSQL schema) of its own.
    """
    found = sorted({table for migration in todo for table in migration.tables} & set(existing))
    if found:
        names = ", ".join(found)
        held = f"tables {names} that are" if found[1:] else f"a table {names} that is"
        msg = (
            f"cannot create ordo's tables in {where}: it holds {held} not ordo's; rename it, "
            "or give ordo a database (or a PostgreSQL schema) of its own"
        )
        raise StorageAccessError(msg)


class _Connection(Protocol):
    def execute(self, sql: Any, params: Any = ..., /) -> Any: ...


def migrate(
    conn: _Connection,
    *,
    package: str,
    current: int,
    param: str,
    existing: Collection[str],
    where: str,
) -> MigrationReceipt:
    """Run the pending migrations of `package` on `conn` (inside the caller's transaction).

    `current` is the version found; `param` is the driver's placeholder (`?` or `%s`);
    `existing` the tables and views there (`TABLE_NAMES`), named as the migrations name theirs;
    `where` names the database in errors. A table the migrations would create that is there
    already is not ordo's (ordo's are created with the version that records them): refused,
    before anything is run (`refuse_foreign_tables`).
    """
    todo = pending(load_migrations(package), current)
    refuse_foreign_tables(todo, existing, where=where)
    for migration in todo:
        for statement in migration.statements:
            conn.execute(statement)
        conn.execute(
            f"INSERT INTO {METADATA_TABLE} (key, value) VALUES ({param}, {param}) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (SCHEMA_VERSION_KEY, str(migration.version)),
        )
    return MigrationReceipt(previous_version=current, version=todo[-1].version if todo else current)
