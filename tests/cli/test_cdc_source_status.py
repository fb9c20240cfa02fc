"""A status or a refused capture leaves a CDC source as it was."""

from __future__ import annotations

import itertools
import sqlite3
from contextlib import closing
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from cdc_cli_support import run_ordo
from ordo.storage.postgres.change_source import PostgresChangeSource
from postgres_source_support import fresh_slot
from sqlite_support import fingerprint


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    source = tmp_path / "shop.db"
    with closing(sqlite3.connect(source)) as conn, conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("CREATE TABLE notes (text TEXT)")
    return source


@pytest.fixture
def journal(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'ordo.db'}"
    assert run_ordo("init", "--journal", url)[0] == 0
    return url


@pytest.fixture
def items_slot(postgres_dsn: str) -> str:
    """A slot name unique to the test, for a PostgreSQL source holding an empty `items` table."""
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id BIGINT PRIMARY KEY)")
    return fresh_slot()


@pytest.mark.parametrize("command", [("status",), ("cdc", "status")])
def test_a_status_of_an_sqlite_source_without_a_capture_installs_none(
    shop: Path, journal: str, command: tuple[str, ...]
) -> None:
    before = fingerprint(shop)

    code, _, err = run_ordo(
        *command, "--journal", journal, "--source", str(shop), "--table", "items"
    )

    assert code == 1
    assert err.strip() == (
        f"Error: CaptureError: no capture is installed in {shop}: start one with `ordo cdc capture`"
    )
    assert fingerprint(shop) == before == (before[0], "delete")


def test_a_status_shows_an_installed_sqlite_capture_and_leaves_it_alone(
    shop: Path, journal: str, tmp_path: Path
) -> None:
    log = str(tmp_path / "log")
    args = ("--journal", journal, "--change-log", log)
    assert run_ordo("cdc", "capture", str(shop), "--table", "items", *args)[0] == 0
    with closing(sqlite3.connect(shop)) as conn, conn:
        conn.execute("INSERT INTO items VALUES (1, 'pen')")
    before = fingerprint(shop)

    code, out, err = run_ordo("cdc", "status", *args, "--source", str(shop), "--table", "items")

    assert code == 0, err
    # the table wraps at 80 columns: the recorded segment (`sqlite:shop.db.<8 hex>`) is wide
    assert "confirmed 0, head 1, lag 1; 1 change" in out
    assert "waiting" in out
    assert fingerprint(shop) == before


def test_a_status_names_a_table_the_sqlite_source_does_not_capture(
    shop: Path, journal: str, tmp_path: Path
) -> None:
    args = ("--journal", journal, "--change-log", str(tmp_path / "log"))
    assert run_ordo("cdc", "capture", str(shop), "--table", "items", *args)[0] == 0

    code, _, err = run_ordo("cdc", "status", *args, "--source", str(shop), "--table", "nosuch")

    assert (code, err) == (
        1,
        f"Error: CaptureError: table 'nosuch' is not captured in {shop} (captured: items)\n",
    )


def test_tables_without_a_source_are_refused(journal: str) -> None:
    code, _, err = run_ordo("status", "--journal", journal, "--table", "items")
    assert code == 1
    assert err.strip() == (
        "Error: ConfigurationError: --table items: captured tables of which source? "
        "Name it (--source)"
    )


@pytest.mark.parametrize("source", ["sqlite", "postgresql://nobody@127.0.0.1:1/none"])
@pytest.mark.parametrize("command", [("status",), ("cdc", "status")])
def test_a_source_without_tables_is_refused_with_the_option_to_name_them(
    shop: Path, journal: str, source: str, command: tuple[str, ...]
) -> None:
    """A PostgreSQL source needs its tables to be looked at; both backends ask for them alike."""
    source = str(shop) if source == "sqlite" else source
    code, _, err = run_ordo(*command, "--journal", journal, "--source", source)
    assert (code, err) == (
        1,
        "Error: ConfigurationError: name the captured tables of --source with --table "
        "(once per table)\n",
    )


@pytest.mark.parametrize("tables", [["nothere"], ["items", "notes"]])
def test_a_refused_capture_leaves_the_sqlite_source_as_it_was(
    shop: Path, journal: str, tmp_path: Path, tables: list[str]
) -> None:
    before = fingerprint(shop)
    chosen = [arg for table in tables for arg in ("--table", table)]

    code, _, err = run_ordo("cdc", "capture", str(shop), *chosen, "--journal", journal)

    assert code == 1
    assert "does not exist" in err or "has no primary key" in err
    assert fingerprint(shop) == before


def _unusable(tmp_path: Path, destination: str) -> Path:
    """A destination that cannot be opened once the source is checked.

    A journal is a folder (SQLite cannot open it; a journal in a missing folder is refused
    before the source is looked at), a change log is inside a regular file (no directory can
    be made there).
    """
    if destination == "--journal":
        folder = tmp_path / "a-folder"
        folder.mkdir()
        return folder
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where a directory is needed")
    return blocker / "inside"


def _ordo_objects(path: Path) -> list[str]:
    with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as conn:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE name LIKE 'ordo_cdc%'")
        return [str(name) for (name,) in rows]


@pytest.mark.parametrize(
    ("destination", "error"),
    [
        ("--journal", "StorageAccessError: cannot open SQLite journal "),  # a folder
        ("--change-log", "StorageAccessError: cannot create the directory of "),  # in a file
    ],
)
def test_a_capture_whose_destination_cannot_be_opened_leaves_the_sqlite_source_as_it_was(
    shop: Path, journal: str, tmp_path: Path, destination: str, error: str
) -> None:
    before = fingerprint(shop)
    destinations = {"--journal": journal, "--change-log": str(tmp_path / "log")}
    destinations[destination] = str(_unusable(tmp_path, destination))

    code, _, err = run_ordo(
        "cdc", "capture", str(shop), "--table", "items", *itertools.chain(*destinations.items())
    )

    assert (code, err.count("\n")) == (1, 1)
    assert err.startswith(f"Error: {error}")
    assert _ordo_objects(shop) == []
    assert fingerprint(shop) == before
    assert not (tmp_path / "log").exists()


def test_a_capture_stopped_by_an_incompatible_schema_leaves_the_sqlite_source_as_it_was(
    shop: Path, journal: str, tmp_path: Path
) -> None:
    declared = tmp_path / "items.json"
    declared.write_text(
        '{"table": "items", "partition_key": ["id"], "columns": ['
        '{"name": "id", "type": "long", "nullable": false}, {"name": "name", "type": "long"}]}'
    )
    assert run_ordo("cdc", "schemas", "register", str(declared), "--journal", journal)[0] == 0
    before = fingerprint(shop)

    code, _, err = run_ordo("cdc", "capture", str(shop), "--table", "items", "--journal", journal)

    assert (code, err.count("\n")) == (1, 1)
    assert err.startswith("Error: IncompatibleSchemaError: ")
    assert _ordo_objects(shop) == []
    assert fingerprint(shop) == before


@pytest.mark.postgres
def test_a_capture_whose_journal_cannot_be_opened_creates_no_slot(
    postgres_dsn: str, items_slot: str, tmp_path: Path
) -> None:
    slot = items_slot
    journal = str(_unusable(tmp_path, "--journal"))
    args = ("--journal", journal, "--change-log", str(tmp_path / "log"), "--slot", slot)

    code, _, err = run_ordo("cdc", "capture", postgres_dsn, "--table", "items", *args)

    assert not _slot_was_created(postgres_dsn, slot)
    assert (code, err.count("\n")) == (1, 1)
    assert err.startswith("Error: StorageAccessError: cannot open SQLite journal ")
    assert not (tmp_path / "log").exists()


def _assert_refused_before_the_journal(source: str, slot: str, tmp_path: Path) -> None:
    """A capture of `source` fails with a one-line CaptureError and creates no destination."""
    journal, log = tmp_path / "ordo.db", tmp_path / "log"
    args = ("--journal", f"sqlite:///{journal}", "--change-log", str(log), "--slot", slot)

    code, _, err = run_ordo("cdc", "capture", source, "--table", "items", *args)

    assert (code, err.count("\n")) == (1, 1)
    assert err.startswith("Error: CaptureError: ")
    assert f"replication slot {slot!r}" in err
    assert not journal.exists()
    assert not log.exists()


@pytest.mark.postgres
def test_a_capture_whose_slot_name_is_taken_leaves_no_journal_or_change_log(
    postgres_dsn: str, items_slot: str, tmp_path: Path
) -> None:
    slot = items_slot
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_create_logical_replication_slot(%s, 'test_decoding')", (slot,))
        try:
            _assert_refused_before_the_journal(postgres_dsn, slot, tmp_path)
        finally:
            conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))


@pytest.mark.postgres
def test_a_capture_by_a_role_that_may_not_replicate_leaves_no_journal_or_change_log(
    postgres_dsn: str, tmp_path: Path
) -> None:
    slot, role = fresh_slot(), fresh_slot()
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        schema = conn.execute("SELECT current_schema()").fetchone()
        assert schema is not None
        names = {"role": sql.Identifier(role), "schema": sql.Identifier(str(schema[0]))}
        conn.execute("CREATE TABLE items (id BIGINT PRIMARY KEY)")
        conn.execute(
            sql.SQL(
                "CREATE ROLE {role} LOGIN; GRANT USAGE ON SCHEMA {schema} TO {role}; "
                "GRANT SELECT ON items TO {role}"
            ).format(**names)
        )
        try:
            source = postgres_dsn.replace("://postgres@", f"://{role}@", 1)
            _assert_refused_before_the_journal(source, slot, tmp_path)
        finally:
            conn.execute(sql.SQL("DROP OWNED BY {role}; DROP ROLE {role}").format(**names))
        assert not _slot_was_created(postgres_dsn, slot)


@pytest.mark.postgres
def test_a_status_of_a_postgres_source_creates_no_slot(postgres_dsn: str, tmp_path: Path) -> None:
    slot = fresh_slot()
    args = ("--journal", f"sqlite:///{tmp_path / 'ordo.db'}", "--source", postgres_dsn)
    assert run_ordo("init", *args[:2])[0] == 0

    code, _, err = run_ordo("cdc", "status", *args, "--table", "items", "--slot", slot)

    assert not _slot_was_created(postgres_dsn, slot)
    assert code == 1
    assert slot in err
    # a status advances nothing, and its slot may never have been created
    assert err.startswith(f"Error: ReplicationSlotMissingError: replication slot {slot!r} ")
    assert "no capture created it, or it was dropped" in err
    assert "nothing was advanced" not in err


@pytest.mark.postgres
def test_a_status_names_a_table_the_postgres_source_cannot_capture(
    postgres_dsn: str, items_slot: str, journal: str
) -> None:
    slot = items_slot
    with PostgresChangeSource(postgres_dsn, slot=slot, tables=["items"]) as source:
        source.create()
        try:
            args = ("cdc", "status", "--journal", journal, "--source", postgres_dsn, "--slot", slot)
            assert run_ordo(*args, "--table", "items")[0] == 0
            code, _, err = run_ordo(*args, "--table", "nosuch")
        finally:
            source.drop()
    assert code == 1
    assert err.startswith("Error: CaptureError: ")
    assert "nosuch" in err


@pytest.mark.parametrize("command", [("cdc", "capture"), ("cdc", "status", "--source")])
def test_a_slot_is_refused_for_an_sqlite_source(
    shop: Path, journal: str, command: tuple[str, ...]
) -> None:
    before = fingerprint(shop)
    args = (*command, str(shop), "--table", "items", "--slot", "mine", "--journal", journal)

    code, _, err = run_ordo(*args)

    assert (code, err) == (
        1,
        "Error: ConfigurationError: slot 'mine': an SQLite source has no replication slot "
        "(--slot is PostgreSQL's)\n",
    )
    assert fingerprint(shop) == before


def _slot_was_created(dsn: str, slot: str) -> bool:
    """Whether `slot` exists; dropped if so (the old behaviour), so that no WAL is kept for it."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        found = conn.execute(
            "SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", (slot,)
        ).fetchone()
    if found is not None:
        with PostgresChangeSource(dsn, slot=slot, tables=["items"]) as source:
            source.drop()
    return found is not None
