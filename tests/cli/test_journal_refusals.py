"""Journals a command cannot use (none there, not ordo's, older, damaged, misaddressed)."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from cli_support import run as _run
from ordo.simulation.cdc import SIMULATED_SCHEMA
from sqlite_support import LATEST, fingerprint, older_journal, stored_version


@pytest.mark.parametrize(
    "command",
    [
        ["events", "p"],
        ["tags"],
        ["info"],
        ["query", "t"],
        ["status"],
        ["processors", "status"],
        ["reconcile", "tags"],
        ["cleanup", "expire"],
        ["verify"],
        ["cdc", "status"],
        ["cdc", "schemas", "list"],
        ["cdc", "ingest"],
        ["cdc", "materialize", "t", "--checkpoint", "unused"],
    ],
)
def test_a_command_that_reads_refuses_what_is_not_a_journal_and_changes_nothing(
    runner: CliRunner, tmp_path: Path, command: list[str]
) -> None:
    missing = tmp_path / "typo" / "journal.db"
    code, _, err = _run(runner, *command, "--journal", f"sqlite:///{missing}", stdin="")
    assert code == 1
    assert err == (
        f"Error: StorageUnavailableError: no journal at {missing}: "
        "create it with `ordo init` or by appending to it\n"
    )
    assert not missing.parent.exists()

    application = tmp_path / "shop.db"
    with closing(sqlite3.connect(application)) as conn, conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY)")
    before = application.read_bytes()
    code, _, err = _run(runner, *command, "--journal", f"sqlite:///{application}", stdin="")
    assert code == 1
    assert err == (
        f"Error: StorageUnavailableError: {application} is not an ordo journal "
        "(it has no ordo_metadata table)\n"
    )
    assert application.read_bytes() == before


@pytest.mark.postgres
def test_a_command_that_reads_refuses_a_postgres_schema_without_a_journal(
    runner: CliRunner, postgres_dsn: str
) -> None:
    code, _, err = _run(runner, "info", "--journal", postgres_dsn)
    assert code == 1
    assert err.startswith("Error: StorageUnavailableError: no ordo journal in PostgreSQL at")
    assert err.count("\n") == 1
    with psycopg.connect(postgres_dsn) as conn:
        schema = conn.execute("SELECT current_schema()").fetchone()
        assert schema is not None
        assert f" in schema '{schema[0]}': create it with `ordo init`" in err
        assert conn.execute("SELECT to_regclass('ordo_metadata')").fetchone() == (None,)
    assert _run(runner, "init", "--journal", postgres_dsn)[0] == 0
    assert _run(runner, "info", "--journal", postgres_dsn)[0] == 0


@pytest.mark.postgres
def test_a_libpq_conninfo_string_is_a_postgres_journal(
    runner: CliRunner, postgres_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    conninfo = make_conninfo("", **conninfo_to_dict(postgres_dsn))
    assert "://" not in conninfo

    assert _run(runner, "init", "--journal", conninfo)[0] == 0

    assert list(tmp_path.iterdir()) == []  # no SQLite file named after the string
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute("SELECT to_regclass('ordo_metadata')").fetchone() != (None,)
    assert _run(runner, "info", "--journal", conninfo)[0] == 0


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["info", "--journal", "mysql://x/y"], "unknown journal URL scheme 'mysql'"),
        (["info"], "no journal given"),
        (
            ["info", "--journal", "postgresql://nobody@127.0.0.1:1/none"],
            "cannot connect to PostgreSQL",
        ),
    ],
)
def test_bad_journal_urls_are_one_line_errors(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch, args: list[str], needle: str
) -> None:
    monkeypatch.delenv("ORDO_JOURNAL", raising=False)
    code, _, err = _run(runner, *args)
    assert code == 1
    assert needle in err


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("host=127.0.0.1 port", 'missing "=" after "port" in connection info string'),
        ("postgresql://127.0.0.1:1/db?colour=red", 'invalid URI query parameter: "colour"'),
        # libpq's "invalid port number" was a StorageUnavailableError, as if the server were down
        ("postgresql://127.0.0.1:99999/db", "port '99999' is not a TCP port (1 to 65535)"),
        ("host=127.0.0.1 port=0", "port '0' is not a TCP port (1 to 65535)"),
        ("host=a,b port=5432,x", "port 'x' is not a TCP port (1 to 65535)"),
    ],
)
@pytest.mark.parametrize("command", [["info"], ["init"], ["append"]])
def test_a_postgres_url_libpq_cannot_parse_is_one_error_line(
    runner: CliRunner, command: list[str], url: str, problem: str
) -> None:
    """psycopg's ProgrammingError left every command as a traceback."""
    code, out, err = _run(runner, *command, "--journal", url, stdin="")
    assert (code, out) == (1, "")
    assert err == f"Error: ConfigurationError: malformed PostgreSQL URL or conninfo: {problem}\n"


@pytest.mark.parametrize("port", ["70000", "abc"])
@pytest.mark.parametrize("command", [["info"], ["init"], ["append"]])
def test_a_pgport_that_is_no_tcp_port_is_one_error_line_naming_it(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch, command: list[str], port: str
) -> None:
    """libpq's "invalid port number" was a StorageUnavailableError, as if the server were down."""
    monkeypatch.setenv("PGPORT", port)
    code, out, err = _run(runner, *command, "--journal", "postgresql://127.0.0.1/db", stdin="")
    assert (code, out) == (1, "")
    assert (
        err == f"Error: ConfigurationError: PGPORT: port '{port}' is not a TCP port (1 to 65535)\n"
    )


@pytest.mark.parametrize("url", [":memory:", "sqlite:///:memory:"])
@pytest.mark.parametrize("command", [["init"], ["append"], ["info"], ["query", "t"], ["status"]])
def test_an_in_memory_journal_is_refused_in_one_line(
    runner: CliRunner, command: list[str], url: str
) -> None:
    """SQLite keeps an in-memory database out of WAL mode, and opening one waited for ever.

    The commands that only read said "no journal at :memory:: create it with `ordo init`",
    which refuses it: docs/cli.md says every command refuses it as no journal.
    """
    code, out, err = _run(runner, *command, "--journal", url, stdin="")
    assert (code, out) == (1, "")
    assert err == (
        "Error: StorageAccessError: cannot open SQLite journal :memory:: an in-memory "
        "database cannot be a journal (it cannot be in WAL mode)\n"
    )


def test_a_url_with_a_misspelt_scheme_is_named_without_its_password(runner: CliRunner) -> None:
    """The error printed the URL as given, password included."""
    code, _, err = _run(runner, "info", "--journal", "postgresq://app:s3cret@db:5432/shop")
    assert code == 1
    assert err == (
        "Error: UnknownUrlSchemeError: unknown journal URL scheme 'postgresq' in "
        "'postgresq://app:***@db:5432/shop'; use one of: sqlite, postgresql, postgres\n"
    )
    assert len(err.strip().splitlines()) == 1


def test_a_damaged_schema_version_is_one_error_line(runner: CliRunner, tmp_path: Path) -> None:
    """A StorageAccessError, as no retry (nor `ordo init`) mends it: it was an outage."""
    path = tmp_path / "j.db"
    assert _run(runner, "init", "--journal", str(path))[0] == 0
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE ordo_metadata SET value = 'abc' WHERE key = 'schema_version'")
    for command in (["info"], ["init"], ["query", "t"]):
        code, _, err = _run(runner, *command, "--journal", str(path))
        assert (code, err) == (
            1,
            "Error: StorageAccessError: the journal's ordo_metadata holds schema_version "
            "'abc', not a version number\n",
        )


READ_ONLY_COMMANDS = [
    ["status"],
    ["query", "t"],
    ["cdc", "status"],
    ["cdc", "schemas", "list"],
    ["processors", "status"],
    ["events", "p"],
    ["tags"],
    ["info"],
    ["reconcile", "tags"],
    ["reconcile", "tags", "p"],
    ["reconcile", "delete", "p", "--dry-run"],
    ["reconcile", "rebuild", "p", "--dry-run"],
    ["reconcile", "rebuild", "--all", "--local", "--dry-run"],
    ["reconcile", "truncate", "--dry-run"],
    ["cleanup", "delete", "p", "--dry-run"],
    ["cleanup", "before", "2020-01-01T00:00:00+00:00", "--dry-run"],
    ["cleanup", "expire", "--time-to-live-ms", "60000", "--dry-run"],
]
"""Commands that only read, dry runs included: they report what they would change."""


@pytest.mark.parametrize("command", READ_ONLY_COMMANDS)
def test_a_command_that_only_reads_neither_creates_nor_upgrades_a_journal(
    runner: CliRunner, tmp_path: Path, command: list[str]
) -> None:
    missing = tmp_path / "missing.db"
    code, _, err = _run(runner, *command, "--journal", str(missing))
    assert (code, err.count("\n")) == (1, 1)
    assert "no journal at" in err
    assert not missing.exists()

    older = tmp_path / "older.db"
    older_journal(older)
    code, _, err = _run(runner, *command, "--journal", str(older))
    assert (code, err) == (
        1,
        f"Error: SchemaVersionError: journal schema version {LATEST - 1} is older than this "
        f"ordo's ({LATEST}); commands that only read do not upgrade it: run `ordo init`\n",
    )
    assert stored_version(older) == LATEST - 1
    assert _run(runner, "init", "--journal", str(older))[0] == 0
    assert _run(runner, *command, "--journal", str(older))[0] == 0


@pytest.mark.parametrize("command", READ_ONLY_COMMANDS)
def test_a_command_that_only_reads_leaves_a_journal_in_rollback_mode_as_it_is(
    runner: CliRunner, tmp_path: Path, command: list[str]
) -> None:
    live = tmp_path / "live.db"
    event = json.dumps({"persistence_id": "p", "payload": {"n": 1}, "tags": ["t"]})
    assert _run(runner, "append", "--journal", str(live), stdin=event)[0] == 0
    backup = tmp_path / "backup.db"
    with closing(sqlite3.connect(live)) as conn:
        conn.execute("VACUUM INTO ?", (str(backup),))  # a backup of a live journal
    before = fingerprint(backup)

    code, _, err = _run(runner, *command, "--journal", str(backup))

    assert code == 0, err
    assert fingerprint(backup) == before == (before[0], "delete")
    assert list(tmp_path.glob("backup.db-*")) == []


_WRITING_COMMANDS = [
    ("append",),
    ("simulate", "--events", "10"),
    ("cdc", "schemas", "register", "{schema}"),
    ("cdc", "capture", "{source}", "--table", "items"),
]
"""Commands that create a missing journal file (not its folder), with `_writing` arguments."""

_EVENT = json.dumps({"persistence_id": "order-1", "payload": {}, "tags": ["order"]})
"""The stdin of `append`."""


def _writing(tmp_path: Path, command: tuple[str, ...]) -> list[str]:
    """`command`'s arguments, with the schema file or the SQLite source it names made."""
    schema = tmp_path / "schema.json"
    schema.write_text(SIMULATED_SCHEMA.to_json())
    source = tmp_path / "shop.db"
    with closing(sqlite3.connect(source)) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY)")
    return [arg.format(schema=schema, source=source) for arg in command]


@pytest.mark.parametrize("command", _WRITING_COMMANDS)
def test_a_command_that_writes_refuses_a_journal_in_a_missing_folder_creating_nothing(
    runner: CliRunner, tmp_path: Path, command: tuple[str, ...]
) -> None:
    """They created the folders of a misspelt path: a tree with a new, empty journal in it."""
    args = _writing(tmp_path, command)
    before = sorted(tmp_path.rglob("*"))

    code, _, err = _run(runner, *args, "--journal", f"{tmp_path}/typo/j.db", stdin=_EVENT)

    assert (code, err) == (
        1,
        f"Error: MissingFolderError: no journal at {tmp_path}/typo/j.db: no folder "
        f"{tmp_path}/typo (`ordo init` or ordo.init_storage() creates both)\n",
    )
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.parametrize("below", ["j.db", "sub/j.db"])
@pytest.mark.parametrize("command", [("init",), *_WRITING_COMMANDS])
def test_a_command_that_writes_names_a_file_where_the_journal_needs_a_folder(
    runner: CliRunner, tmp_path: Path, command: tuple[str, ...], below: str
) -> None:
    """It said "no folder notes", for a folder that `ordo init` could not make either (it said
    "cannot create the directory ...: File exists")."""
    args = _writing(tmp_path, command)
    (tmp_path / "notes").write_text("mine")
    before = sorted(tmp_path.rglob("*"))

    code, _, err = _run(runner, *args, "--journal", f"{tmp_path}/notes/{below}", stdin=_EVENT)

    assert (code, err) == (
        1,
        f"Error: StorageAccessError: no journal at {tmp_path}/notes/{below}: "
        f"{tmp_path}/notes is a file, not a folder\n",
    )
    assert sorted(tmp_path.rglob("*")) == before
    assert (tmp_path / "notes").read_text() == "mine"


def test_a_folder_init_may_not_create_is_no_outage(runner: CliRunner) -> None:
    """It was StorageUnavailableError, an outage, ending with the OSError's repr.

    /sys refuses a new folder to everyone, root included (these tests run as root)."""
    code, out, err = _run(runner, "init", "--journal", "/sys/ordo/j.db")
    assert (code, out, err.count("\n")) == (1, "", 1)
    assert err.startswith(
        "Error: StorageAccessError: cannot create the directory of SQLite journal /sys/ordo/j.db: "
    )
    assert err.endswith(": /sys/ordo\n")


_OPENED = "cannot open SQLite journal {0}: unable to open database file ({0} is a folder, not "
_LOOKED_AT = "no journal at {0}: it is a folder, not "


@pytest.mark.parametrize(
    ("command", "problem"),
    [(["init"], _OPENED), (["append"], _OPENED), (["info"], _LOOKED_AT), (["tags"], _LOOKED_AT)],
)
def test_a_folder_named_as_the_journal_is_refused_as_a_folder(
    runner: CliRunner, tmp_path: Path, command: list[str], problem: str
) -> None:
    """A reading command said "no journal: create it with `ordo init`", which failed too.

    A StorageAccessError, as no retry mends it: it was StorageUnavailableError, an outage."""
    folder = tmp_path / "journal.db"
    folder.mkdir()
    code, _, err = _run(runner, *command, "--journal", str(folder), stdin="")
    assert (code, err.count("\n")) == (1, 1)
    assert err.startswith(f"Error: StorageAccessError: {problem.format(folder)}an SQLite file")
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("command", [["info"], ["tags"], ["cdc", "status"]])
def test_a_command_that_reads_names_a_file_where_the_journal_needs_a_folder(
    runner: CliRunner, tmp_path: Path, command: list[str]
) -> None:
    """It said "create it with `ordo init`", which cannot make a folder where a file is.

    A StorageAccessError, as no retry mends it: it was StorageUnavailableError, an outage."""
    (tmp_path / "notes").write_text("mine")
    code, _, err = _run(runner, *command, "--journal", f"{tmp_path}/notes/j.db")
    assert (code, err) == (
        1,
        f"Error: StorageAccessError: no journal at {tmp_path}/notes/j.db: "
        f"{tmp_path}/notes is a file, not a folder\n",
    )


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
@pytest.mark.parametrize("command", [["init"], ["append"], ["info"], ["tags"]])
def test_a_folder_where_sqlite_keeps_a_file_beside_the_journal_is_named(
    runner: CliRunner, tmp_path: Path, command: list[str], suffix: str
) -> None:
    """SQLite said "unable to open database file" or "disk I/O error"; `info` read the journal
    with a `-shm` folder beside it, and `append` then said it "cannot be written: attempt to
    write a readonly database", a StorageAccessError for a permission problem there was not.
    Now a StorageAccessError naming the folder: no retry mends it until the folder goes."""
    journal = tmp_path / "journal.db"
    assert _run(runner, "init", "--journal", str(journal))[0] == 0
    before = journal.read_bytes()
    Path(f"{journal}{suffix}").mkdir()

    code, out, err = _run(runner, *command, "--journal", str(journal), stdin=_EVENT)

    assert (code, out) == (1, "")
    assert err == (
        f"Error: StorageAccessError: cannot open SQLite journal {journal}: "
        f"{journal}{suffix} is a folder, not the {suffix} file SQLite keeps beside it\n"
    )
    assert journal.read_bytes() == before
