"""SQLite files as the tests make and inspect them: journals of an older schema, statements run
as an application would, fingerprints.
"""

from __future__ import annotations

import hashlib
import sqlite3
from contextlib import closing
from pathlib import Path

from ordo.storage.migration import load_migrations

LATEST = load_migrations("ordo.storage.sqlite")[-1].version
JOURNAL_ID_VERSION = next(
    m.version for m in load_migrations("ordo.storage.sqlite") if m.name == "journal_id"
)
"""The schema version that records the journal's id (the same number on both backends)."""


def older_journal(path: Path, *, version: int = LATEST - 1) -> None:
    """A journal as the ordo of schema `version` left it (by default the one before the latest)."""
    with closing(sqlite3.connect(path)) as conn, conn:
        for migration in load_migrations("ordo.storage.sqlite")[:version]:
            for statement in migration.statements:
                conn.execute(statement)
        conn.execute(
            "INSERT INTO ordo_metadata (key, value) VALUES ('schema_version', ?)", (version,)
        )


def newer_journal(path: Path) -> Path:
    """A journal as an ordo with a migration more than this one's would leave it."""
    with closing(sqlite3.connect(path)) as conn, conn:
        for migration in load_migrations("ordo.storage.sqlite"):
            for statement in migration.statements:
                conn.execute(statement)
        conn.execute(
            "INSERT INTO ordo_metadata (key, value) VALUES ('schema_version', ?)", (LATEST + 1,)
        )
    return path


def stored_version(path: Path) -> int:
    """The schema version the journal at `path` records, read without changing the file."""
    with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as conn:
        row = conn.execute("SELECT value FROM ordo_metadata WHERE key = 'schema_version'")
        return int(row.fetchone()[0])


def fingerprint(path: Path) -> tuple[str, str]:
    """The file's bytes and its journal mode (a WAL switch leaves the bytes alone at first)."""
    with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as conn:
        mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0])
    return hashlib.sha256(path.read_bytes()).hexdigest(), mode


def run_sql(database: Path, *statements: str) -> None:
    """Run `statements` on `database` in one committed transaction, as its application would."""
    with sqlite3.connect(database) as conn:
        for statement in statements:
            conn.execute(statement)
