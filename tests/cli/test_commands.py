from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest
from click.testing import CliRunner
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ordo import EventsByTagSettings, NewEvent, open_journal
from ordo.cli.main import cli
from ordo.processing import TrackingToken
from ordo.processing.ports import SegmentAction, SegmentRequest
from ordo.simulation.cdc import SIMULATED_SCHEMA
from ordo.storage.open import init_storage, stores_at
from ordo.time import BucketSize, TimeUUID, format_first_time_bucket
from ordo.types import PersistenceId
from sqlite_support import LATEST, fingerprint, newer_journal, older_journal, stored_version

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def _run(runner: CliRunner, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(cli, list(args), input=stdin)
    return result.exit_code, result.stdout, result.stderr


def test_init_is_idempotent(
    runner: CliRunner, journal_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ORDO_BUCKET_SIZE", raising=False)
    code, out, _ = _run(runner, "init", "--journal", journal_url, "--json")
    assert code == 0
    assert json.loads(out) == {
        "previous_version": 0,
        "version": LATEST,
        "previous_bucket_size": None,
        "bucket_size": None,
    }
    code, out, _ = _run(runner, "init", "--journal", journal_url, "--json")
    assert code == 0
    assert json.loads(out)["previous_version"] == LATEST


def test_init_records_the_bucket_size_of_the_environment(
    runner: CliRunner, journal_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ORDO_BUCKET_SIZE=minute ordo init recorded nothing: a write with the default got hour."""
    monkeypatch.setenv("ORDO_BUCKET_SIZE", "Minute")
    code, out, _ = _run(runner, "init", "--journal", journal_url)
    assert (code, out) == (0, f"schema at version {LATEST} (was 0); bucket size minute recorded\n")
    code, out, _ = _run(runner, "init", "--journal", journal_url)
    assert (code, out) == (0, f"schema already at version {LATEST}; nothing to do\n")

    monkeypatch.delenv("ORDO_BUCKET_SIZE")
    line = json.dumps({"persistence_id": "p", "payload": {}, "tags": ["t"]})
    code, _, err = _run(runner, "append", "--journal", journal_url, stdin=line)
    assert code == 1
    assert err.startswith("Error: BucketSizeMismatchError: journal records bucket_size=m")
    code, out, _ = _run(runner, "info", "--journal", journal_url, "--json")
    assert (json.loads(out)["bucket_size"], json.loads(out)["events"]) == ("minute", 0)


def test_init_refuses_another_bucket_size_than_the_recorded_one(
    runner: CliRunner, journal_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ORDO_BUCKET_SIZE", raising=False)
    line = json.dumps({"persistence_id": "p", "payload": {}, "tags": ["t"]})
    assert _run(runner, "append", "--journal", journal_url, stdin=line)[0] == 0
    monkeypatch.setenv("ORDO_BUCKET_SIZE", "day")

    code, out, err = _run(runner, "init", "--journal", journal_url, "--json")

    assert (code, out) == (1, "")
    assert err.startswith("Error: BucketSizeMismatchError: journal records bucket_size=h")
    assert err.count("\n") == 1
    monkeypatch.setenv("ORDO_BUCKET_SIZE", "hour")
    code, out, _ = _run(runner, "init", "--journal", journal_url, "--json")
    assert code == 0
    assert (json.loads(out)["previous_bucket_size"], json.loads(out)["bucket_size"]) == (
        "hour",
        "hour",
    )


def test_init_refuses_another_bucket_size_before_upgrading_an_older_journal(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refused init used to upgrade the schema first: a rejected input changed the file."""
    older = tmp_path / "older.db"
    older_journal(older)
    with closing(sqlite3.connect(older)) as conn, conn:
        conn.execute("INSERT INTO ordo_metadata (key, value) VALUES ('bucket_size', 'hour')")
    before = _schema_of(older)
    monkeypatch.setenv("ORDO_BUCKET_SIZE", "day")

    code, out, err = _run(runner, "init", "--journal", str(older))

    assert (code, out) == (1, "")
    assert err.startswith("Error: BucketSizeMismatchError: journal records bucket_size=h")
    assert (stored_version(older), _schema_of(older)) == (LATEST - 1, before)
    monkeypatch.setenv("ORDO_BUCKET_SIZE", "hour")
    assert _run(runner, "init", "--journal", str(older))[0] == 0
    assert stored_version(older) == LATEST


def _schema_of(path: Path) -> list[tuple[str, str]]:
    """The tables and indexes of an SQLite file (init may switch it to WAL even when refused)."""
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute("SELECT name, sql FROM sqlite_schema ORDER BY name").fetchall()


def test_init_without_a_bucket_size_leaves_it_to_the_first_write(
    runner: CliRunner, journal_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty journal is not fixed to the default: docs/cli.md says the first write records it."""
    monkeypatch.delenv("ORDO_BUCKET_SIZE", raising=False)
    assert _run(runner, "init", "--journal", journal_url)[0] == 0
    monkeypatch.setenv("ORDO_BUCKET_SIZE", "day")
    line = json.dumps({"persistence_id": "p", "payload": {}, "tags": ["t"]})
    assert _run(runner, "append", "--journal", journal_url, stdin=line)[0] == 0
    code, out, _ = _run(runner, "info", "--journal", journal_url, "--json")
    assert (code, json.loads(out)["bucket_size"]) == (0, "day")


def test_append_names_its_argument_file_as_its_help_and_the_docs_do(
    runner: CliRunner, tmp_path: Path
) -> None:
    """The usage line and the error said SOURCE, the help text and docs/cli.md FILE."""
    code, out, _ = _run(runner, "append", "--help")
    assert (code, out.splitlines()[0]) == (0, "Usage: ordo append [OPTIONS] [FILE]")
    missing = tmp_path / "events.jsonl"
    code, _, err = _run(runner, "append", str(missing), "--journal", f"{tmp_path}/j.db")
    assert code == 2
    assert err.startswith(f"Error: Invalid value for '[FILE]': '{missing}': No such file")
    assert not (tmp_path / "j.db").exists()


def test_append_then_events_and_info(runner: CliRunner, journal_url: str) -> None:
    lines = "\n".join(
        json.dumps(line)
        for line in (
            {"persistence_id": "order-1", "payload": {"n": 1}, "tags": ["order"]},
            {"persistence_id": "order-1", "payload": {"n": 2}, "tags": ["order", "pay"]},
            {
                "persistence_id": "order-2",
                "payload": {"n": 3},
                "manifest": "Placed",
                "metadata": {"by": "cli"},
                "expected_sequence_nr": 0,
            },
        )
    )
    code, out, _ = _run(runner, "append", "--journal", journal_url, "--json", stdin=lines)
    assert code == 0, out
    assert json.loads(out)["events"] == 3
    code, out, _ = _run(runner, "events", "order-1", "--journal", journal_url, "--json")
    assert code == 0
    replayed = json.loads(out)
    assert [e["payload"] for e in replayed] == [{"n": 1}, {"n": 2}]
    assert replayed[1]["tags"] == {"order": 2, "pay": 1}
    code, out, _ = _run(runner, "info", "--journal", journal_url, "--json")
    assert code == 0
    info = json.loads(out)
    assert (info["events"], info["persistence_ids"]) == (3, 2)
    assert info["tags"] == {"order": 2, "pay": 1}
    code, out, _ = _run(runner, "tags", "--journal", journal_url, "--json")
    assert [t["tag"] for t in json.loads(out)] == ["order", "pay"]
    code, out, _ = _run(runner, "tags", "--journal", journal_url)
    order, pay = out.splitlines()
    assert order.startswith("order\t2 events\t1 persistence id\t")  # 1 or 2 hour buckets
    assert pay == "pay\t1 event\t1 persistence id\t1 bucket"


def test_tags_json_gives_the_buckets_in_iso_8601_utc(
    runner: CliRunner, journal_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It gave Akka's `20260131T10:00`, and `verify --json` epoch millis, for the same thing."""
    monkeypatch.setenv("ORDO_BUCKET_SIZE", "hour")
    event = json.dumps({"persistence_id": "order-1", "payload": 1, "tags": ["order"]})
    assert _run(runner, "append", "--journal", journal_url, stdin=event)[0] == 0
    code, out, _ = _run(runner, "events", "order-1", "--journal", journal_url, "--json")
    (written,) = json.loads(out)
    hour = datetime.fromisoformat(written["timestamp"]).replace(minute=0, second=0, microsecond=0)

    code, out, _ = _run(runner, "tags", "--journal", journal_url, "--json")

    assert code == 0
    (tag,) = json.loads(out)
    assert (tag["first_bucket"], tag["last_bucket"]) == (hour.isoformat(), hour.isoformat())
    assert tag["first_bucket"].endswith("+00:00")


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ('{"persistence_id": "", "payload": 1}', "persistence_id must not be empty"),
        ('{"persistence_id": "p", "payload": 1, "tags": [""]}', "tag must not be empty"),
        ('{"persistence_id": "p"}', "missing key payload"),
        (
            '{"persistence_id": "p", "payload": 1, "colour": 1}',
            "the event has unknown key 'colour' (valid keys: persistence_id, payload, ",
        ),
        ("not json", "not valid JSON"),
        (
            '{"persistence_id": "p", "payload": 1, "expected_sequence_nr": -1}',
            "expected_sequence_nr must be an integer >= 0, got -1",
        ),
        ('{"persistence_id": "q", "payload": NaN}', "line 2: payload is neither bytes nor JSON"),
        ('{"persistence_id": "q", "payload": [1e999]}', "line 2: payload is neither bytes"),
        ('{"persistence_id": "q", "payload": "\\ud800"}', "line 2: payload is neither bytes"),
        ('{"persistence_id": "q", "payload": 1, "manifest": "\\ud800"}', "line 2: manifest"),
        ('{"persistence_id": "q", "payload": 1, "manifest": "a\\u0000b"}', "line 2: manifest"),
    ],
)
def test_a_bad_line_is_one_error_line_and_nothing_is_written(
    runner: CliRunner, tmp_path: Path, line: str, needle: str
) -> None:
    url = f"sqlite:///{tmp_path}/j.db"
    good = '{"persistence_id": "p", "payload": 0}'
    code, _, err = _run(runner, "append", "--journal", url, stdin=f"{good}\n{line}\n")
    assert code == 1
    assert needle in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "j.db").exists()  # validated before the journal is even opened


def _journal_with_one_event(runner: CliRunner, tmp_path: Path) -> str:
    """A new SQLite journal holding one event of persistence id "o"."""
    url = f"sqlite:///{tmp_path}/j.db"
    stdin = '{"persistence_id": "o", "payload": 0}'
    assert _run(runner, "append", "--journal", url, stdin=stdin)[0] == 0
    return url


def test_a_conflict_stops_the_appends_at_its_line_and_says_what_was_written(
    runner: CliRunner, tmp_path: Path
) -> None:
    url = _journal_with_one_event(runner, tmp_path)
    lines = [
        '{"persistence_id": "a", "payload": 1}',
        '{"persistence_id": "a", "payload": 2}',
        '{"persistence_id": "o", "payload": 3, "expected_sequence_nr": 0}',
        '{"persistence_id": "b", "payload": 4}',
    ]
    code, _, err = _run(runner, "append", "--journal", url, stdin="\n".join(lines))
    assert code == 1
    assert err.strip() == (
        "Error: AppendStoppedError: line 3: ConcurrencyConflictError: persistence_id='o': "
        "expected sequence_nr 0 but the journal is at 1; the appends of lines 1-2 were written "
        "(2 events)"
    )
    code, out, _ = _run(runner, "info", "--journal", url, "--json")
    assert (json.loads(out)["events"], json.loads(out)["persistence_ids"]) == (3, 2)

    code, _, err = _run(runner, "append", "--journal", url, stdin="\n".join(lines[1:]))
    assert code == 1
    assert err.strip().endswith("; the append of line 1 was written (1 event)")


def test_binary_input_is_one_error_line_and_nothing_is_written(
    runner: CliRunner, tmp_path: Path
) -> None:
    result = runner.invoke(
        cli, ["append", "--journal", f"{tmp_path}/j.db"], input=b'{"persistence_id": "p"}\xff\n'
    )
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "Error: InvalidInputError: the input is not UTF-8 text (invalid start byte)"
    )
    assert not (tmp_path / "j.db").exists()


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


def test_a_conflicting_expected_sequence_nr_is_reported(runner: CliRunner, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/j.db"
    line = '{"persistence_id": "p", "payload": 0, "expected_sequence_nr": 0}'
    assert _run(runner, "append", "--journal", url, stdin=line)[:2] == (
        0,
        "appended 1 event to 1 persistence id\n",
    )
    code, _, err = _run(runner, "append", "--journal", url, stdin=line)
    assert code == 1
    assert "ConcurrencyConflictError" in err
    assert "expected sequence_nr 0 but the journal is at 1" in err


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
    path = tmp_path / "j.db"
    assert _run(runner, "init", "--journal", str(path))[0] == 0
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE ordo_metadata SET value = 'abc' WHERE key = 'schema_version'")
    for command in (["info"], ["init"], ["query", "t"]):
        code, _, err = _run(runner, *command, "--journal", str(path))
        assert (code, err) == (
            1,
            "Error: StorageUnavailableError: the journal's ordo_metadata holds schema_version "
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


@pytest.mark.parametrize(
    ("variable", "value", "command", "problem"),
    [
        ("ORDO_MAX_MESSAGE_BATCH_SIZE", "0", "events", "max_message_batch_size must be an"),
        ("ORDO_FLUSH_INTERVAL_MS", "-5", "query", "flush_interval must be a duration >= 0"),
        ("ORDO_REFRESH_INTERVAL_MS", "0", "query", "refresh_interval must be a duration > 0"),
        ("ORDO_WRITER_LEASE_TIMEOUT_MS", "1", "status", "writer_lease_timeout must be longer"),
        ("ORDO_PAGE_SIZE", str(10**30), "query", "page_size is too large: at most 90071992547"),
        ("ORDO_MAX_MESSAGE_BATCH_SIZE", str(2**53), "events", "max_message_batch_size is too"),
        ("ORDO_ROWS_PER_BATCH", str(10**20), "status", "rows_per_batch is too large"),
    ],
)
def test_a_setting_out_of_range_in_the_environment_names_the_variable(
    runner: CliRunner,
    journal_url: str,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    value: str,
    command: str,
    problem: str,
) -> None:
    line = json.dumps({"persistence_id": "p", "payload": {}, "tags": ["t"]})
    assert _run(runner, "append", "--journal", journal_url, stdin=line)[0] == 0
    monkeypatch.setenv(variable, value)
    args = {"events": ["events", "p"], "query": ["query", "t"]}.get(command, [command])
    code, _, err = _run(runner, *args, "--journal", journal_url)
    assert code == 1
    assert err.startswith(f"Error: ConfigurationError: {variable}: {problem}")


def test_a_bad_setting_in_the_environment_names_the_key(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORDO_BUCKET_SIZE", "week")
    code, _, err = _run(runner, "events", "p", "--journal", f"{tmp_path}/j.db")
    assert code == 1
    assert "ORDO_BUCKET_SIZE" in err
    assert "week" in err


def test_the_demo_fails_on_an_unreachable_journal_before_starting_spark(runner: CliRunner) -> None:
    code, _, err = _run(runner, "demo", "--journal", "postgresql://nobody@127.0.0.1:1/none")
    assert code == 1
    assert err.startswith("Error: StorageUnavailableError: cannot connect to PostgreSQL")
    assert "starting Spark" not in err


def test_the_demo_refuses_a_journal_with_events_before_starting_spark(
    runner: CliRunner, tmp_path: Path
) -> None:
    url = _journal_with_one_event(runner, tmp_path)
    code, _, err = _run(runner, "demo", "--journal", url)
    assert code == 1
    assert err.startswith("Error: ConfigurationError: the demo needs an empty journal")
    assert "starting Spark" not in err
    assert json.loads(_run(runner, "info", "--journal", url, "--json")[1])["events"] == 1


def test_the_demo_refuses_an_applications_database_before_starting_spark(
    runner: CliRunner, tmp_path: Path
) -> None:
    """It counted as an empty journal: the demo filled it with events, tables and triggers."""
    path = tmp_path / "app.db"
    with closing(sqlite3.connect(path)) as conn:
        conn.executescript("CREATE TABLE users (id INTEGER PRIMARY KEY); CREATE VIEW v AS SELECT 1")
    before = fingerprint(path)
    code, _, err = _run(runner, "demo", "--events", "10", "--journal", f"sqlite:///{path}")
    assert code == 1
    assert err == (
        f"Error: ConfigurationError: the demo writes a journal of its own, and sqlite:///{path} "
        "is no ordo journal but holds tables (users, v): name a new file or an empty database\n"
    )
    assert fingerprint(path) == before


def test_the_demo_refuses_a_journal_of_a_newer_ordo_before_starting_spark(
    runner: CliRunner, tmp_path: Path
) -> None:
    """Its check only read the schema version: the demo failed once Spark had started."""
    path = newer_journal(tmp_path / "newer.db")
    before = fingerprint(path)
    code, _, err = _run(runner, "demo", "--events", "10", "--journal", f"sqlite:///{path}")
    assert code == 1
    assert err == (
        f"Error: SchemaVersionError: journal schema version {LATEST + 1} is newer than this ordo "
        f"supports ({LATEST}); upgrade ordo\n"
    )
    assert fingerprint(path) == before


def test_the_demo_refuses_a_journal_in_a_missing_folder_before_starting_spark(
    runner: CliRunner, tmp_path: Path
) -> None:
    """A misspelt folder was created silently, as `pipeline run` refuses for its sink."""
    url = f"sqlite:///{tmp_path}/nodir/x.db"
    code, _, err = _run(runner, "demo", "--events", "10", "--journal", url)
    assert code == 1
    assert err == (
        f"Error: StorageUnavailableError: no journal at {tmp_path}/nodir/x.db: no folder "
        f"{tmp_path}/nodir (`ordo init` creates both)\n"
    )
    assert not (tmp_path / "nodir").exists()


@pytest.mark.parametrize(
    "command",
    [
        ("append",),
        ("simulate", "--events", "10"),
        ("cdc", "schemas", "register", "{schema}"),
        ("cdc", "capture", "{source}", "--table", "items"),
    ],
)
def test_a_command_that_writes_refuses_a_journal_in_a_missing_folder_creating_nothing(
    runner: CliRunner, tmp_path: Path, command: tuple[str, ...]
) -> None:
    """They created the folders of a misspelt path: a tree with a new, empty journal in it."""
    schema = tmp_path / "schema.json"
    schema.write_text(SIMULATED_SCHEMA.to_json())
    source = tmp_path / "shop.db"
    with closing(sqlite3.connect(source)) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY)")
    before = sorted(tmp_path.rglob("*"))
    args = [arg.format(schema=schema, source=source) for arg in command]
    event = json.dumps({"persistence_id": "order-1", "payload": {}, "tags": ["order"]})

    code, _, err = _run(runner, *args, "--journal", f"{tmp_path}/typo/j.db", stdin=event)

    assert (code, err) == (
        1,
        f"Error: StorageUnavailableError: no journal at {tmp_path}/typo/j.db: no folder "
        f"{tmp_path}/typo (`ordo init` creates both)\n",
    )
    assert sorted(tmp_path.rglob("*")) == before


def test_init_creates_the_folders_of_a_new_journal(runner: CliRunner, tmp_path: Path) -> None:
    """`ordo init` is for making journals, as `git init a/b` makes its folders."""
    code, _, err = _run(runner, "init", "--journal", f"{tmp_path}/new/folder/j.db")
    assert code == 0, err
    assert (tmp_path / "new" / "folder" / "j.db").is_file()


def _demo_whose_spark_does_not_start(url: str, tmp_path: Path) -> None:
    """Run `ordo demo --master bogus` on `url`, in a process of its own (its first Spark
    session is this one), and check that it fails as Spark refuses the master."""
    demo = subprocess.run(
        [sys.executable, "-m", "ordo.cli.main", "demo", "--journal", url, "--master", "bogus"],
        capture_output=True,
        text=True,
        env={**os.environ, "ORDO_SPARK_LOG": str(tmp_path / "spark.log")},
        check=False,
    )
    assert demo.returncode == 1
    assert demo.stderr.splitlines()[-1].startswith(
        "Error: ConfigurationError: Spark did not start with master 'bogus': "
    )


def test_a_demo_whose_spark_does_not_start_leaves_no_journal_behind(tmp_path: Path) -> None:
    """The journal was created, with ordo's tables, before Spark refused the master."""
    url = f"sqlite:///{tmp_path}/new.db"
    _demo_whose_spark_does_not_start(url, tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["spark.log"]


@pytest.mark.postgres
def test_the_demo_refusing_a_postgres_database_does_not_show_its_password(
    runner: CliRunner, postgres_dsn: str
) -> None:
    """The message held the URL as given, password included."""
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE users (id int)")
    url = make_conninfo(postgres_dsn, password="s3cret")  # noqa: S106 - the test server trusts any
    code, _, err = _run(runner, "demo", "--events", "10", "--journal", url)
    assert code == 1
    assert err.startswith("Error: ConfigurationError: the demo writes a journal of its own, and ")
    assert "PostgreSQL at 127.0.0.1:" in err
    assert "s3cret" not in err


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_a_demo_whose_spark_does_not_start_leaves_a_database_without_ordo_tables_alone(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    """The demo's check for events gave the database ordo's tables before Spark was asked.

    The database is empty: one holding tables is refused before Spark (see above).
    """
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path}/app.db"
        (tmp_path / "app.db").touch()

        def tables() -> list[str]:
            with closing(sqlite3.connect(tmp_path / "app.db")) as conn:
                return [row[0] for row in conn.execute("SELECT name FROM sqlite_schema")]
    else:
        url = request.getfixturevalue("postgres_dsn")

        def tables() -> list[str]:
            with psycopg.connect(url) as conn:
                query = "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                return [row[0] for row in conn.execute(query)]

    before = tables()

    _demo_whose_spark_does_not_start(url, tmp_path)

    assert tables() == before


@pytest.mark.spark
def test_the_demo_runs_the_pipeline_and_its_verdict_is_clean(
    runner: CliRunner, tmp_path: Path, spark: SparkSession
) -> None:
    url = f"sqlite:///{tmp_path}/demo.db"
    code, out, err = _run(
        runner,
        "demo",
        "--journal",
        url,
        "--events",
        "1500",
        "--writers",
        "2",
        "--json",
        "--master",
        "local[2]",
    )
    assert code == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["events"] == 1500
    assert result["clean"] is True
    assert result["lost"] == result["duplicated"] == result["misordered"] == 0
    assert result["segments"] == 5  # four, one of them split while the stream ran
    assert result["projected_events"] > 0
    assert result["events_per_s"] > 0
    assert result["cdc_violations"] == 0
    assert result["cdc_changes"] >= result["projected_events"]  # an upsert per projected event
    assert 0 < result["cdc_messages"] <= result["cdc_changes"]


def test_simulate_prints_one_json_verdict(runner: CliRunner, tmp_path: Path) -> None:
    code, out, err = _run(
        runner,
        "simulate",
        "--journal",
        f"sqlite:///{tmp_path}/sim.db",
        "--events",
        "300",
        "--writers",
        "2",
        "--rate",
        "600",
        "--restarts",
        "1",
        "--json",
    )
    assert code == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["events"] == 300
    assert result["lost"] == result["duplicated"] == result["misordered"] == 0
    assert {"p50", "p90", "p99", "max"} <= set(result["latency_ms"])


def test_simulate_text_shows_each_field_apart_and_as_its_json(
    runner: CliRunner, tmp_path: Path
) -> None:
    """The fields were Python's text, and the longest key was glued to its value."""
    code, out, err = _run(
        runner, "simulate", "--journal", f"sqlite:///{tmp_path}/sim.db", "--events", "40"
    )
    assert code == 0, err
    fields = dict(line.split(maxsplit=1) for line in out.splitlines())
    assert json.loads(fields["lost_as_the_seeds_allow"]) == {
        "restart": 0,
        "first_encounter": 0,
        "beyond_back_track": 0,
    }
    assert {"p50", "p90", "p99", "max"} <= set(json.loads(fields["latency_ms"]))


def test_info_text_shows_what_its_json_shows(runner: CliRunner, tmp_path: Path) -> None:
    """A bucket size not recorded yet read "None", then "null", and the tags were a Python dict."""
    url = f"sqlite:///{tmp_path}/i.db"
    assert _run(runner, "init", "--journal", url)[0] == 0
    code, out, _ = _run(runner, "info", "--journal", url)
    assert code == 0
    assert out.splitlines() == [
        "backend          sqlite",
        f"schema_version   {LATEST}",
        "bucket_size      not recorded yet (set by the first write, or by `ordo init` with "
        "ORDO_BUCKET_SIZE)",
        "events           0",
        "persistence_ids  0",
        "tags             {}",
    ]
    line = json.dumps({"persistence_id": "p", "payload": 1, "tags": ["t", "ü"]})
    assert _run(runner, "append", "--journal", url, stdin=line)[0] == 0
    out = _run(runner, "info", "--journal", url)[1]
    assert out.splitlines()[2] == "bucket_size      hour"
    assert out.splitlines()[-1] == 'tags             {"t": 1, "ü": 1}'


@pytest.mark.parametrize("kind", ["not a journal", "another bucket size"])
def test_simulate_on_a_journal_it_cannot_use_fails_once_before_starting(
    runner: CliRunner, tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "j.db"
    if kind == "not a journal":
        path.write_text("hello\n")
    else:  # no events: a journal that holds some is refused as not empty
        init_storage(str(path), bucket_size=BucketSize.HOUR)
    code, out, err = _run(runner, "simulate", "--journal", str(path), "--events", "20")
    assert (code, out) == (1, "")
    assert "Traceback" not in err
    (line,) = [line for line in err.splitlines() if line.strip()]
    if kind == "not a journal":
        assert line.startswith("Error: StorageUnavailableError")
    else:  # the command's own flag, not the variable the other commands read
        assert line.startswith("Error: BucketSizeMismatchError")
        assert line.endswith("; run with --bucket-size hour")


def test_simulate_refuses_bad_options(runner: CliRunner) -> None:
    code, _, err = _run(runner, "simulate", "--writers", "0")
    assert code == 2
    assert "--writers" in err


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["info", "--bogus"],
            "Error: No such option '--bogus' (valid: --journal, --json, --help); "
            "see 'ordo info --help'",
        ),
        (
            ["cdc", "bogus"],
            "Error: No such command 'bogus' (valid: capture, ingest, materialize, schemas, "
            "simulate, status); see 'ordo cdc --help'",
        ),
        (
            ["--bogus"],
            "Error: No such option '--bogus' (valid: --debug, --log-level, --version, --help); "
            "see 'ordo --help'",
        ),
        (["events"], "Error: Missing argument 'PERSISTENCE_ID'; see 'ordo events --help'"),
        (
            ["events", "p", "--to", "99999999999999999999"],
            "Error: Invalid value for '--to': 99999999999999999999 is not in the range "
            "1<=x<=9007199254740991; see 'ordo events --help'",
        ),
        (
            ["events", "p", "--from", "0"],
            "Error: Invalid value for '--from': 0 is not in the range 1<=x<=9007199254740991; "
            "see 'ordo events --help'",
        ),
        (
            ["events", "p", "--from", "-1"],
            "Error: Invalid value for '--from': -1 is not in the range 1<=x<=9007199254740991; "
            "see 'ordo events --help'",
        ),
        (
            ["events", "p", "--to", "0"],
            "Error: Invalid value for '--to': 0 is not in the range 1<=x<=9007199254740991; "
            "see 'ordo events --help'",
        ),
        (
            ["events", "p", "--from", "5", "--to", "2"],
            "Error: Invalid value for '--to': 2 is before --from 5; see 'ordo events --help'",
        ),
    ],
)
def test_a_usage_error_is_one_line_with_status_2(
    runner: CliRunner, args: list[str], line: str
) -> None:
    code, out, err = _run(runner, *args)
    assert (code, out, err) == (2, "", line + "\n")


@pytest.mark.parametrize(
    "args",
    [
        ["cleanup", "expire", "--time-to-live-ms", "99999999999999999999"],
        ["reconcile", "delete", "p", "--writer-lease-timeout-ms", "99999999999999999999"],
        ["simulate", "--events", "99999999999999999999"],
    ],
)
def test_a_huge_number_is_a_usage_error_naming_its_option(
    runner: CliRunner, tmp_path: Path, args: list[str]
) -> None:
    code, _, err = _run(runner, *args, "--journal", f"{tmp_path}/j.db")
    assert code == 2
    assert err.startswith(f"Error: Invalid value for '{args[-2]}'")
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("value", ["-5", "5000"])
def test_a_lease_timeout_not_above_the_heartbeat_is_a_usage_error_naming_the_bound(
    runner: CliRunner, tmp_path: Path, value: str
) -> None:
    """It exited 1 with the settings' ConfigurationError, and --help showed no lower bound."""
    url = f"sqlite:///{tmp_path}/j.db"
    assert _run(runner, "init", "--journal", url)[0] == 0
    code, _, err = _run(
        runner, "verify", "--repair", "--writer-lease-timeout-ms", value, "--journal", url
    )
    assert code == 2
    assert err.startswith(
        "Error: Invalid value for '--writer-lease-timeout-ms' (env var: "
        f"'ORDO_WRITER_LEASE_TIMEOUT_MS'): {value} is not in the range 5000<x<="
    )
    assert "5000<x<=" in _run(runner, "reconcile", "truncate", "--help")[1]


def test_query_reads_a_tag_in_offset_order(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path}/q.db"
    monkeypatch.setenv("ORDO_FIRST_TIME_BUCKET", format_first_time_bucket(time.time_ns() // 10**6))
    monkeypatch.setenv("ORDO_EVENTUAL_CONSISTENCY_DELAY_MS", "0")
    monkeypatch.setenv("ORDO_FLUSH_INTERVAL_MS", "0")
    lines = "\n".join(
        json.dumps({"persistence_id": f"p{i % 2}", "payload": {"i": i}, "tags": ["t"]})
        for i in range(5)
    )
    assert _run(runner, "append", "--journal", url, stdin=lines)[0] == 0
    code, out, err = _run(runner, "query", "t", "--journal", url, "--json")
    assert code == 0, err
    delivered = [json.loads(line) for line in out.splitlines()]
    assert [e["payload"]["i"] for e in delivered] == [0, 1, 2, 3, 4]
    assert [e["tag_pid_sequence_nr"] for e in delivered] == [1, 1, 2, 2, 3]
    code, out, _ = _run(
        runner, "query", "t", "--journal", url, "--json", "--offset", delivered[1]["offset"]
    )
    assert [json.loads(line)["payload"]["i"] for line in out.splitlines()] == [2, 3, 4]
    code, out, _ = _run(runner, "query", "t", "--journal", url, "--live", "--limit", "2")
    assert code == 0
    assert len(out.splitlines()) == 2


def test_query_help_says_its_json_is_one_object_per_event(runner: CliRunner) -> None:
    """It said "one JSON document", but a query (a live one never ends) prints JSON lines."""
    code, out, _ = _run(runner, "query", "--help")
    assert code == 0
    assert "one JSON document" not in out
    assert "Print one JSON object per event, one per line (JSON lines)." in " ".join(out.split())


def _one_event_settled_at_once(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """A journal holding event p#1 of tag t, read with no consistency delay from this bucket."""
    url = f"sqlite:///{tmp_path}/q.db"
    monkeypatch.setenv("ORDO_FIRST_TIME_BUCKET", format_first_time_bucket(time.time_ns() // 10**6))
    monkeypatch.setenv("ORDO_EVENTUAL_CONSISTENCY_DELAY_MS", "0")
    line = json.dumps({"persistence_id": "p", "payload": {}, "tags": ["t"]})
    assert _run(runner, "append", "--journal", url, stdin=line)[0] == 0
    return url


def test_python_m_runs_the_cli_and_ctrl_c_ends_a_live_query_quietly(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _one_event_settled_at_once(runner, tmp_path, monkeypatch)
    live = subprocess.Popen(  # inherits the environment, PYTHONPATH included
        [sys.executable, "-m", "ordo.cli.main", "query", "t", "--live", "--journal", url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert live.stdout is not None
        assert "p#1" in live.stdout.readline()  # the query is live once it delivered the event
        live.send_signal(signal.SIGINT)
        _, err = live.communicate(timeout=30)
    finally:
        live.kill()
    assert (live.returncode, err) == (130, "")


def test_a_query_that_prints_nothing_says_why(runner: CliRunner, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/q.db"
    line = json.dumps({"persistence_id": "p", "payload": {}, "tags": ["t"]})
    assert _run(runner, "append", "--journal", url, stdin=line)[0] == 0

    code, out, err = _run(runner, "query", "t", "--journal", url)  # the default delay is 5 s

    assert code == 0
    assert out == ""
    assert "no events of tag 't' are settled" in err
    assert "eventual-consistency delay (5 s" in err
    code, out, err = _run(runner, "query", "t", "--journal", url, "--offset", "2000-01-01T00:00Z")
    assert "no events of tag 't' after --offset 2000-01-01T00:00Z are settled: events" in err


def test_a_query_after_the_last_event_says_nothing_is_after_its_offset(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It used to say "a tag without events reads empty" of a tag with events."""
    url = _one_event_settled_at_once(runner, tmp_path, monkeypatch)
    last = json.loads(_run(runner, "query", "t", "--journal", url, "--json")[1])["offset"]

    code, out, err = _run(runner, "query", "t", "--journal", url, "--offset", last)

    assert (code, out) == (0, "")
    assert err.startswith(f"no events of tag 't' after --offset {last} are settled: events")
    assert "without events" not in err


@pytest.mark.parametrize(
    ("offset", "message"),
    [
        ("yesterday-ish", "--offset 'yesterday-ish' is neither a TimeUUID nor an ISO-8601 time"),
        ("garbage", "--offset 'garbage' is neither a TimeUUID nor an ISO-8601 time"),
        ("2026-01-01T00:00", "--offset '2026-01-01T00:00' has no zone; add one (e.g. +00:00)"),
        (
            "2f1e0c4e-9c1a-4b7e-8d3e-4f5a6b7c8d9e",
            "'2f1e0c4e-9c1a-4b7e-8d3e-4f5a6b7c8d9e' is not a version-1 (time-based) UUID",
        ),
    ],
)
def test_query_refuses_bad_offsets(
    runner: CliRunner, tmp_path: Path, offset: str, message: str
) -> None:
    """A text without a dash was refused as "not a UUID", a naive time with a library's advice."""
    code, _, err = _run(runner, "query", "t", "--journal", f"{tmp_path}/q.db", "--offset", offset)
    assert (code, err) == (1, f"Error: OffsetFormatError: {message}\n")
    assert not (tmp_path / "q.db").exists()


def test_query_reads_from_an_iso_time_in_the_basic_format(
    runner: CliRunner, tmp_path: Path
) -> None:
    """An ISO-8601 time without dashes was read as a UUID and refused."""
    url = f"sqlite:///{tmp_path}/q.db"
    assert _run(runner, "init", "--journal", url)[0] == 0
    code, _, err = _run(runner, "query", "t", "--journal", url, "--offset", "20000101T000000Z")
    assert code == 0
    assert "after --offset 20000101T000000Z are settled" in err


def test_query_refuses_another_bucket_size_than_the_journal(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path}/q.db"
    line = json.dumps({"persistence_id": "p", "payload": {}, "tags": ["t"]})
    assert _run(runner, "append", "--journal", url, stdin=line)[0] == 0
    monkeypatch.setenv("ORDO_BUCKET_SIZE", "minute")

    code, out, err = _run(runner, "query", "t", "--journal", url)

    assert (code, out) == (1, "")
    assert err.startswith("Error: BucketSizeMismatchError: journal records bucket_size=h")
    assert err.endswith("; set ORDO_BUCKET_SIZE to hour\n")


def test_processors_can_be_inspected_and_steered_offline(runner: CliRunner, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/p.db"
    with stores_at(url) as stores:
        stores.tokens.initialize("counts", segment_count=2)
    code, out, _ = _run(runner, "processors", "status", "--journal", url, "--json")
    assert code == 0
    assert [row["segment"] for row in json.loads(out)] == ["Segment[0/1]", "Segment[1/1]"]
    code, out, _ = _run(runner, "processors", "split", "counts", "1", "--journal", url)
    assert (code, out.strip()) == (0, "split Segment[1/1] into Segment[1/3] and Segment[3/3]")
    code, out, _ = _run(runner, "processors", "merge", "counts", "3", "--journal", url)
    assert (code, out.strip()) == (0, "merged into Segment[1/1]")
    code, out, _ = _run(runner, "processors", "release", "counts", "0", "--journal", url)
    assert code == 0
    assert "not claimed" in out
    code, out, _ = _run(runner, "processors", "reset", "counts", "--journal", url)
    assert code == 0
    assert "reset" in out
    with stores_at(url) as stores:
        assert all(entry.owner is None for entry in stores.tokens.entries("counts"))


def test_processors_status_shows_where_replays_end_after_a_reset(
    runner: CliRunner, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path}/p.db"
    processed = TimeUUID.min_for_epoch_ns(1_700_000_000_000_000_000)
    with stores_at(url) as stores:
        stores.tokens.initialize("counts", segment_count=1)
        stores.tokens.claim("counts", 0, "w", now_ms=0, claim_timeout_ms=1)
        with stores.tokens.batch("counts", 0, "w") as batch:
            batch.store_token(TrackingToken(processed))
        stores.tokens.release("counts", 0, "w")
    code, out, _ = _run(runner, "processors", "status", "--journal", url)
    assert code == 0
    assert "replays" not in out
    assert _run(runner, "processors", "reset", "counts", "--journal", url)[0] == 0

    code, out, _ = _run(runner, "processors", "status", "--journal", url)

    assert code == 0
    assert out.strip().endswith(f"token=start  replays until {processed}")

    with stores_at(url) as stores:  # the replay reaches the boundary: nothing is a replay now
        stores.tokens.claim("counts", 0, "w", now_ms=0, claim_timeout_ms=1)
        with stores.tokens.batch("counts", 0, "w") as batch:
            batch.store_token(TrackingToken(processed))
        stores.tokens.release("counts", 0, "w")
    code, out, _ = _run(runner, "processors", "status", "--journal", url)
    assert (code, "replays" in out) == (0, False)


def test_processors_reset_clears_a_projections_positions_in_its_own_sink(
    runner: CliRunner, tmp_path: Path
) -> None:
    """The sink has the positions but no tokens: a reset of the journal left them, and one of
    the sink said the processor had no tokens."""
    journal, sink = f"sqlite:///{tmp_path}/j.db", f"sqlite:///{tmp_path}/sink.db"
    processed = TimeUUID.min_for_epoch_ns(1_700_000_000_000_000_000)
    with stores_at(journal) as stores:
        stores.tokens.initialize("totals", segment_count=1)
        stores.tokens.advance_unclaimed("totals", processed, now_ms=0, claim_timeout_ms=1)
    with stores_at(sink) as stores, stores.tokens.batch("totals", 0, "spark") as batch:
        batch.record(PersistenceId("order-1"), 2)

    def tokens_and_positions() -> tuple[list[str], dict[PersistenceId, int]]:
        with stores_at(journal) as at_journal, stores_at(sink) as at_sink:
            entries = at_journal.tokens.entries("totals")
            return [str(e.token) for e in entries], dict(at_sink.tokens.positions("totals"))

    before = tokens_and_positions()
    other = f"sqlite:///{tmp_path}/other.db"
    with stores_at(other):
        pass  # an ordo database without the processor
    for wrong, error in (
        (
            f"sqlite:///{tmp_path}/sinc.db",
            f"StorageUnavailableError: no sink database at {tmp_path}/sinc.db: "
            "is the path misspelt?\n",
        ),
        (other, "UnknownProcessorError: the sink: processor 'totals' has no tokens"),
    ):
        code, out, err = _run(
            runner, "processors", "reset", "totals", "--journal", journal, "--sink", wrong
        )
        assert (code, out, err.count("\n")) == (1, "", 1)
        assert err.startswith(f"Error: {error}")
        assert tokens_and_positions() == before
    assert not (tmp_path / "sinc.db").exists()

    code, out, _ = _run(
        runner, "processors", "reset", "totals", "--journal", journal, "--sink", sink
    )

    assert (code, out.strip()) == (
        0,
        "reset 'totals' to start and cleared its positions in the sink; "
        "events processed before are replays",
    )
    assert tokens_and_positions() == (["start"], {})


def _sink_with_positions_only(tmp_path: Path) -> str:
    """A sink with a processor's tokens ('counts') and another's positions alone ('totals')."""
    sink = f"sqlite:///{tmp_path}/sink.db"
    with stores_at(sink) as stores:
        stores.tokens.initialize("counts", segment_count=1)
        with stores.tokens.batch("totals", 0, "spark") as batch:
            for persistence_id in ("order-1", "order-2"):
                batch.record(PersistenceId(persistence_id), 2)
    return sink


def test_processors_status_lists_a_projection_that_has_only_positions_in_its_sink(
    runner: CliRunner, tmp_path: Path
) -> None:
    """Status of a projection's own sink listed nothing: it has positions but no tokens."""
    sink = _sink_with_positions_only(tmp_path)

    code, out, _ = _run(runner, "processors", "status", "--journal", sink)

    assert code == 0
    assert out.splitlines() == [
        "counts  Segment[0/0]     owner=-  not claimed  token=start",
        "totals  no tokens  2 positions (a Spark projection's own sink: "
        "`processors reset --sink` clears them)",
    ]
    code, out, _ = _run(runner, "processors", "status", "totals", "--journal", sink, "--json")
    assert (code, json.loads(out)) == (
        0,
        [
            {
                "processor": "totals",
                "segment": None,
                "owner": None,
                "token": None,
                "ahead": [],
                "claim_age_ms": None,
                "replay_until": None,
                "request": None,
                "request_age_ms": None,
                "positions": 2,
            }
        ],
    )
    code, out, _ = _run(runner, "processors", "status", "--journal", sink, "--json")
    assert [(row["processor"], row["positions"]) for row in json.loads(out)] == [
        ("counts", None),
        ("totals", 2),
    ]


def test_status_lists_a_projection_that_has_only_positions_in_its_sink(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ordo status` of a projection's own sink left it out, as `processors status` did."""
    sink = _sink_with_positions_only(tmp_path)
    log = tmp_path / "log"
    log.mkdir()
    status = ("status", "--journal", sink, "--change-log", str(log))

    code, out, _ = _run(runner, *status, "--json")

    assert code == 0
    processors = json.loads(out)["processors"]
    assert [(p["processor"], p["positions"]) for p in processors] == [
        ("counts", None),
        ("totals", 2),
    ]
    assert processors[1] == {
        "processor": "totals",
        "segments": [],
        "lag_events": None,
        "lag_ms": None,
        "positions": 2,
    }
    monkeypatch.setenv("COLUMNS", "200")  # the table's rows on one line each
    code, out, _ = _run(runner, *status)
    assert code == 0
    row = next(line for line in out.splitlines() if "totals" in line)
    assert [cell.strip() for cell in row.split("│")[1:-1]] == [
        "totals",
        "-",
        "-",
        "no tokens  2 positions (a Spark projection's own sink: `processors reset --sink` "
        "clears them)",
        "-",
        "-",
    ]


@pytest.mark.postgres
def test_processors_reset_names_a_missing_postgres_sink_as_the_sink(
    runner: CliRunner, tmp_path: Path, postgres_dsn: str
) -> None:
    """It said "no ordo journal ...: create it with `ordo init`" of the sink."""
    journal = f"sqlite:///{tmp_path}/j.db"
    processed = TimeUUID.min_for_epoch_ns(1_700_000_000_000_000_000)
    with stores_at(journal) as stores:
        stores.tokens.initialize("totals", segment_count=1)
        stores.tokens.advance_unclaimed("totals", processed, now_ms=0, claim_timeout_ms=1)

    code, out, err = _run(
        runner, "processors", "reset", "totals", "--journal", journal, "--sink", postgres_dsn
    )

    assert (code, out, err.count("\n")) == (1, "", 1)
    assert err.startswith("Error: StorageUnavailableError: no ordo sink database in PostgreSQL at")
    assert "ordo init" not in err
    with stores_at(journal) as stores:
        assert stores.tokens.entries("totals")[0].token == TrackingToken(processed)


BEHIND = TimeUUID.min_for_epoch_ns(1_700_000_000_000_000_000)
AHEAD = TimeUUID.min_for_epoch_ns(1_700_000_001_000_000_000)


def _merged_processor(url: str) -> None:
    """Processor counts: Segment[1/1] at AHEAD merged into Segment[0/1] at BEHIND, unclaimed."""
    with stores_at(url) as stores:
        stores.tokens.initialize("counts", segment_count=2)
        for segment_id, offset in ((0, BEHIND), (1, AHEAD)):
            stores.tokens.claim("counts", segment_id, "w", now_ms=0, claim_timeout_ms=1)
            with stores.tokens.batch("counts", segment_id, "w") as batch:
                batch.store_token(TrackingToken(offset))
        stores.tokens.release("counts", 1, "w")
        stores.tokens.merge("counts", 0, "w", now_ms=0, claim_timeout_ms=1)
        stores.tokens.release("counts", 0, "w")


def test_status_json_carries_plain_offsets_and_the_merged_parts_ahead(
    runner: CliRunner, tmp_path: Path
) -> None:
    """The JSON token used to be the display text `<offset> (+1 merged part(s) ahead)`."""
    url = f"sqlite:///{tmp_path}/p.db"
    behind, ahead = BEHIND, AHEAD
    _merged_processor(url)
    merged = {
        "segment": "Segment[0/0]",
        "owner": None,
        "token": str(behind),
        "ahead": [{"segment": "Segment[1/1]", "offset": str(ahead)}],
        "claim_age_ms": None,
        "replay_until": None,
        "request": None,
        "request_age_ms": None,
    }
    code, out, _ = _run(runner, "processors", "status", "--journal", url, "--json")
    assert (code, json.loads(out)) == (0, [{"processor": "counts", **merged, "positions": None}])
    log = tmp_path / "log"
    log.mkdir()
    code, out, _ = _run(runner, "status", "--journal", url, "--change-log", str(log), "--json")
    assert (code, json.loads(out)["processors"][0]["segments"]) == (0, [merged])
    assert _run(runner, "processors", "reset", "counts", "--journal", url)[0] == 0

    code, out, _ = _run(runner, "processors", "status", "--journal", url, "--json")

    (row,) = json.loads(out)
    assert (row["token"], row["ahead"], row["replay_until"]) == (None, [], str(ahead))


def test_status_shows_a_segment_that_processed_nothing_at_start_as_processors_status_does(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ordo status` showed its token as `-`, `processors status` as `start`."""
    monkeypatch.setenv("COLUMNS", "200")  # the table's rows on one line each
    url = f"sqlite:///{tmp_path}/p.db"
    with stores_at(url) as stores:
        stores.tokens.initialize("counts", segment_count=1)
    log = tmp_path / "log"
    log.mkdir()

    code, out, _ = _run(runner, "processors", "status", "--journal", url)
    assert (code, out) == (0, "counts  Segment[0/0]     owner=-  not claimed  token=start\n")
    code, out, _ = _run(runner, "status", "--journal", url, "--change-log", str(log))
    assert code == 0
    row = next(line for line in out.splitlines() if "counts" in line)
    assert [cell.strip() for cell in row.split("│")[1:-1]][:5] == [
        "counts",
        "Segment[0/0]",
        "-",
        "start",
        "-",
    ]


def test_status_text_shows_the_merged_parts_ahead(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ordo status showed only the token, and processors status only `(+1 merged part(s) ahead)`:
    neither said which part was ahead, nor up to where, as the JSON does."""
    monkeypatch.setenv("COLUMNS", "200")  # rich's table would fold the offsets at 80
    url = f"sqlite:///{tmp_path}/p.db"
    _merged_processor(url)
    part = f"merged part Segment[1/1] ahead at {AHEAD}"

    code, out, _ = _run(runner, "processors", "status", "--journal", url)

    assert (code, out.strip()) == (
        0,
        f"counts  Segment[0/0]     owner=-  not claimed  token={BEHIND}  {part}",
    )
    log = tmp_path / "log"
    log.mkdir()
    code, out, _ = _run(runner, "status", "--journal", url, "--change-log", str(log))
    assert code == 0
    lines = out.splitlines()
    (row,) = [n for n, line in enumerate(lines) if str(BEHIND) in line]
    assert lines[row + 1].index(part) == lines[row].index(str(BEHIND))  # the token's cell


def test_a_request_that_replaces_a_pending_one_says_so(runner: CliRunner, tmp_path: Path) -> None:
    """A segment holds one request: a release dropped a pending split, saying only "release"."""
    url = f"sqlite:///{tmp_path}/p.db"
    with stores_at(url) as stores:
        stores.tokens.initialize("counts", segment_count=2)
        stores.tokens.claim(
            "counts", 1, "worker-1", now_ms=time.time_ns() // 1_000_000, claim_timeout_ms=1
        )
    steer = ("counts", "1", "--journal", url)
    code, out, _ = _run(runner, "processors", "split", *steer)
    assert (code, out) == (0, "asked worker-1 to split segment Segment[1/1]\n")
    code, out, _ = _run(runner, "processors", "release", *steer)
    assert (code, out) == (
        0,
        "asked worker-1 to release Segment[1/1] (replacing the pending split request)\n",
    )
    code, out, _ = _run(runner, "processors", "release", *steer)
    assert (code, out) == (0, "asked worker-1 to release Segment[1/1]\n")
    code, out, _ = _run(runner, "processors", "merge", *steer)
    assert out.startswith("asked worker-1 to merge Segment[1/1] with its sibling (replacing the ")
    assert out.endswith("release request)\n")


def test_a_request_that_would_replace_a_hand_over_is_refused_unless_told_to(
    runner: CliRunner, tmp_path: Path
) -> None:
    """The owner of segment 0, merging, asked the owner of segment 1 to hand it over: a
    release replaced that, and the merge was held up with only the receipt to say so."""
    url = f"sqlite:///{tmp_path}/p.db"
    with stores_at(url) as stores:
        stores.tokens.initialize("counts", segment_count=2)
        stores.tokens.claim(
            "counts", 1, "worker-1", now_ms=time.time_ns() // 1_000_000, claim_timeout_ms=60_000
        )
        hand_over = SegmentRequest(action=SegmentAction.HAND_OVER, target_owner="worker-0")
        stores.tokens.request("counts", 1, hand_over, now_ms=0)
    steer = ("counts", "1", "--journal", url)
    code, out, err = _run(runner, "processors", "release", *steer)
    assert (code, out) == (1, "")
    assert err == (
        "Error: PendingHandOverError: processor 'counts' segment 1 is waiting for its owner to "
        "hand it over to 'worker-0' for a merge: a release request would replace that and hold "
        "the merge up (--replace-hand-over, or replace_hand_over=True, replaces it anyway)\n"
    )
    code, out, _ = _run(runner, "processors", "status", "--journal", url)
    assert "hand over to worker-0 requested" in out
    code, out, _ = _run(runner, "processors", "release", *steer, "--replace-hand-over")
    assert (code, out) == (
        0,
        "asked worker-1 to release Segment[1/1] (replacing the pending hand over to worker-0 "
        "request)\n",
    )


def test_status_shows_a_request_its_owner_has_not_taken_yet(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`processors split` on a running processor only asks the owner: status showed nothing of
    it, so an operator could not tell a pending split from one that was lost."""
    monkeypatch.setenv("COLUMNS", "200")
    url = f"sqlite:///{tmp_path}/p.db"
    with stores_at(url) as stores:
        stores.tokens.initialize("counts", segment_count=2)
        stores.tokens.claim(
            "counts", 1, "worker-1", now_ms=time.time_ns() // 1_000_000, claim_timeout_ms=1
        )
    code, out, _ = _run(runner, "processors", "split", "counts", "1", "--journal", url)
    assert (code, out.strip()) == (0, "asked worker-1 to split segment Segment[1/1]")

    code, out, _ = _run(runner, "processors", "status", "--journal", url, "--json")

    rows = {row["segment"]: row for row in json.loads(out)}
    assert (rows["Segment[0/1]"]["request"], rows["Segment[0/1]"]["request_age_ms"]) == (None, None)
    assert rows["Segment[1/1]"]["request"] == "split"
    assert 0 <= rows["Segment[1/1]"]["request_age_ms"] < 60_000
    code, out, _ = _run(runner, "processors", "status", "--journal", url)
    assert code == 0
    first, second = out.strip().splitlines()
    assert "requested" not in first
    assert re.search(r"owner=worker-1 .* split requested \d+\.\d s ago$", second)
    log = tmp_path / "log"
    log.mkdir()
    code, out, _ = _run(runner, "status", "--journal", url, "--change-log", str(log), "--json")
    segments = json.loads(out)["processors"][0]["segments"]
    assert [s["request"] for s in segments] == [None, "split"]
    code, out, _ = _run(runner, "status", "--journal", url, "--change-log", str(log))
    assert "split requested" in out
    with stores_at(url) as stores:
        assert stores.tokens.take_request("counts", 1) is not None

    code, out, _ = _run(runner, "processors", "status", "--journal", url)

    assert "requested" not in out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["processors", "status", "nobody"], "UnknownProcessorError"),
        (["processors", "merge", "counts", "0"], "InvalidSegmentOperationError"),
        (["processors", "split", "counts", "9"], "UnknownSegmentError: processor 'counts' has no"),
        (["processors", "reset", "counts", "--to", "bad"], "OffsetFormatError"),
        (
            ["processors", "reset", "counts", "--to", "12345678-1234-1234-1234-123456789012"],
            "FutureOffsetError: offset 12345678-1234-1234-1234-123456789012 (2085-11-29",
        ),
    ],
)
def test_processor_commands_refuse_bad_input(
    runner: CliRunner, tmp_path: Path, args: list[str], needle: str
) -> None:
    url = f"sqlite:///{tmp_path}/p.db"
    with stores_at(url) as stores:
        stores.tokens.initialize("counts", segment_count=1)
        before = stores.tokens.entries("counts")
    code, _, err = _run(runner, *args, "--journal", url)
    assert code == 1
    assert needle in err
    with stores_at(url) as stores:
        assert stores.tokens.entries("counts") == before


@pytest.mark.spark
def test_a_pipeline_file_runs_a_projection(
    runner: CliRunner, tmp_path: Path, spark: SparkSession
) -> None:
    path = tmp_path / "shop.db"
    url = f"sqlite:///{path}"
    first = format_first_time_bucket(time.time_ns() // 10**6 - 3_600_000)
    settings = EventsByTagSettings(first_time_bucket=first, flush_interval=timedelta(0))
    with open_journal(url, settings=settings) as journal:
        for i in range(30):
            journal.append(f"order-{i % 3}", [NewEvent.of(i, tags=["order"])])
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(
            "CREATE TABLE order_totals (pid TEXT PRIMARY KEY, events BIGINT NOT NULL, "
            "last_nr BIGINT NOT NULL, misordered BIGINT NOT NULL)"
        )
    config = tmp_path / "pipeline.toml"
    config.write_text(
        f'[pipeline]\njournal = "{url}"\ntag = "order"\nprocessor = "totals"\n'
        'handler = "ordo.spark.demo:count_order_events"\n'
        f'checkpoint = "{tmp_path / "checkpoint"}"\nsegments = 2\n'
        f'[source]\nfirstTimeBucket = "{first}"\neventualConsistencyDelayMs = 0\n',
        encoding="utf-8",
    )
    code, out, err = _run(runner, "pipeline", "run", str(config), "--master", "local[2]")
    assert code == 0, err
    assert "stopped" in out
    batches = re.findall(r"^pipeline 'totals': batch \d+, (\d+) rows in [\d.]+ s$", err, re.M)
    assert sum(int(rows) for rows in batches) == 30
    with closing(sqlite3.connect(path)) as conn:
        totals = conn.execute("SELECT pid, events, misordered FROM order_totals").fetchall()
    assert sorted(totals) == [(f"order-{p}", 10, 0) for p in range(3)]


@pytest.mark.spark
def test_a_pipeline_reads_with_the_ordo_variables_of_its_command(
    runner: CliRunner, tmp_path: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A minute-bucket journal needed [source] bucketSize although ORDO_BUCKET_SIZE was set.

    Spark's session here was started before the variables were set, as a cluster's executors
    do not have them: the command gives the source what it resolved.
    """
    from ordo.spark.demo import ORDER_TOTALS_TABLE

    path = tmp_path / "shop.db"
    url = f"sqlite:///{path}"
    first = format_first_time_bucket(time.time_ns() // 10**6 - 600_000)
    settings = EventsByTagSettings(
        bucket_size="minute", first_time_bucket=first, flush_interval=timedelta(0)
    )
    with open_journal(url, settings=settings) as journal:
        for i in range(12):
            journal.append(f"order-{i % 3}", [NewEvent.of(i, tags=["order"])])
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(ORDER_TOTALS_TABLE)
    config = tmp_path / "pipeline.toml"
    config.write_text(
        f'[pipeline]\njournal = "{url}"\ntag = "order"\nprocessor = "totals"\n'
        'handler = "ordo.spark.demo:count_order_events"\n'
        f'checkpoint = "{tmp_path / "checkpoint"}"\n'
        "[source]\neventualConsistencyDelayMs = 0\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("ORDO_BUCKET_SIZE", "minute")
    monkeypatch.setenv("ORDO_FIRST_TIME_BUCKET", first)
    code, _, err = _run(runner, "pipeline", "run", str(config), "--master", "local[2]")
    assert code == 0, err
    with closing(sqlite3.connect(path)) as conn:
        totals = conn.execute("SELECT pid, events FROM order_totals").fetchall()
    assert sorted(totals) == [(f"order-{p}", 4) for p in range(3)]


@pytest.mark.spark
def test_a_failing_pipeline_is_one_error_line_naming_the_handlers_exception(
    runner: CliRunner, tmp_path: Path, spark: SparkSession
) -> None:
    url = f"sqlite:///{tmp_path}/shop.db"
    first = format_first_time_bucket(time.time_ns() // 10**6 - 3_600_000)
    settings = EventsByTagSettings(first_time_bucket=first, flush_interval=timedelta(0))
    with open_journal(url, settings=settings) as journal:
        journal.append("order-1", [NewEvent.of(1, tags=["order"])])
    config = tmp_path / "pipeline.toml"
    config.write_text(  # the demo's handler, but the sink has no order_totals table
        f'[pipeline]\njournal = "{url}"\ntag = "order"\nprocessor = "totals"\n'
        'handler = "ordo.spark.demo:count_order_events"\n'
        f'checkpoint = "{tmp_path / "checkpoint"}"\n'
        f'[source]\nfirstTimeBucket = "{first}"\neventualConsistencyDelayMs = 0\n',
        encoding="utf-8",
    )
    code, _, err = _run(runner, "pipeline", "run", str(config))
    assert code == 1
    assert err == (
        "Error: QueryFailedError: pipeline 'totals' failed: "
        "StorageError: SQLite error: no such table: order_totals\n"
    )


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[pipeline]\ncolour = 1\n", "[pipeline] has unknown key 'colour' (valid keys: journal, "),
        (
            'colour = 1\n[pipeline]\njournal = "x.db"\n',
            "has unknown table 'colour' (valid tables: ",
        ),
        (
            '[pipeline]\njournal = "x.db"\ntag = "t"\nprocessor = ""\n'
            'handler = "ordo.spark.demo:count_order_events"\ncheckpoint = "c"\n',
            "[pipeline] processor must be a non-empty string, got ''",
        ),
        ('[pipeline]\njournal = "x.db"\n', "needs tag, processor, handler, checkpoint"),
        (
            f'[pipeline]\njournal = "x.db"\ntag = "t"\nprocessor = "{"p" * 256}"\n'
            'handler = "ordo.spark.demo:count_order_events"\ncheckpoint = "c"\n',
            "[pipeline] processor: processor name is 256 characters long, at most 255 allowed",
        ),
        (
            '[pipeline]\njournal = "x.db"\ntag = "t"\nprocessor = "p"\n'
            'handler = "no.such.module:f"\ncheckpoint = "c"\n',
            "cannot import handler",
        ),
        (
            '[pipeline]\njournal = "sqlite:///no/such.db"\ntag = "t"\nprocessor = "p"\n'
            'handler = "ordo.spark.demo:count_order_events"\ncheckpoint = "c"\n',
            "StorageUnavailableError: no journal at no/such.db",
        ),
    ],
)
def test_a_bad_pipeline_file_is_one_error_line(
    runner: CliRunner, tmp_path: Path, text: str, needle: str
) -> None:
    config = tmp_path / "pipeline.toml"
    config.write_text(text, encoding="utf-8")
    code, _, err = _run(runner, "pipeline", "run", str(config))
    assert code == 1
    assert needle in err


@pytest.mark.parametrize(
    ("source", "function", "problem"),
    [
        (  # a script's argument parsing, say: the command ended with status 3 and no word
            "import sys\nsys.exit(3)\n",
            "handle",
            "cannot import handler '{module}:handle': SystemExit: 3",
        ),
        (  # with dead_letters, every event went to the dead letters and the run succeeded
            "def handle(event):\n    pass\n",
            "handle",
            "handler '{module}:handle' cannot be called with (event, context): too many ",
        ),
        (
            "class Handle:\n    pass\n",
            "Handle",
            "handler '{module}:Handle' cannot be called with (event, context): too many ",
        ),
        (
            "def handle(event, context, sink):\n    pass\n",
            "handle",
            "cannot be called with (event, context): missing a required argument: 'sink'",
        ),
    ],
)
def test_a_handler_that_cannot_handle_events_is_one_error_line_before_spark_starts(
    runner: CliRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    source: str,
    function: str,
    problem: str,
) -> None:
    module = re.sub(r"\W", "_", tmp_path.name)  # its own name: imported modules are kept
    (tmp_path / f"{module}.py").write_text(source, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = _pipeline_file(tmp_path, "dead_letters = true\n")
    text = config.read_text(encoding="utf-8")
    config.write_text(
        text.replace("ordo.spark.demo:count_order_events", f"{module}:{function}"), encoding="utf-8"
    )
    code, _, err = _run(runner, "pipeline", "run", str(config))
    assert code == 1
    assert err.startswith("Error: ConfigurationError: ")
    assert err.count("\n") == 1
    assert problem.format(module=module) in err
    assert not (tmp_path / "checkpoint").exists()


def test_a_sink_ordo_cannot_open_is_one_error_line_before_spark_starts(
    runner: CliRunner, tmp_path: Path
) -> None:
    """A folder, a file that is not SQLite, an unreachable server: the query failed once Spark
    had started, and left a checkpoint."""
    folder = tmp_path / "folder"
    folder.mkdir()
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n", encoding="utf-8")
    for sink, problem in [
        (f"sqlite:///{folder}", f"cannot open SQLite journal {folder}: unable to open database"),
        (str(text), f"cannot open SQLite journal {text}: file is not a database"),
        (
            "postgresql://nobody@127.0.0.1:1/shop",
            "cannot connect to PostgreSQL at 127.0.0.1:1/shop",
        ),
    ]:
        config = _pipeline_file(tmp_path, f'sink = "{sink}"\n')
        code, _, err = _run(runner, "pipeline", "run", str(config))
        assert code == 1
        assert err.startswith(
            f"Error: StorageUnavailableError: {config}: [pipeline] sink: {problem}"
        )
        assert err.count("\n") == 1
        assert not (tmp_path / "checkpoint").exists()
    assert text.read_text(encoding="utf-8") == "not a database\n"
    assert list(folder.iterdir()) == []


def test_a_sink_of_a_newer_ordo_is_one_error_line_before_spark_starts(
    runner: CliRunner, tmp_path: Path
) -> None:
    """The check only read the schema version: the projection failed on it once Spark ran."""
    sink = newer_journal(tmp_path / "sink.db")
    before = fingerprint(sink)
    config = _pipeline_file(tmp_path, f'sink = "sqlite:///{sink}"\n')
    code, _, err = _run(runner, "pipeline", "run", str(config))
    assert code == 1
    assert err == (
        f"Error: StorageUnavailableError: {config}: [pipeline] sink: journal schema version "
        f"{LATEST + 1} is newer than this ordo supports ({LATEST}); upgrade ordo\n"
    )
    assert fingerprint(sink) == before
    assert not (tmp_path / "checkpoint").exists()


def test_a_sink_of_an_older_ordo_passes_the_check_unchanged(tmp_path: Path) -> None:
    """The projection upgrades it once it runs; the check does not."""
    from ordo.spark.pipeline import PipelineConfig

    sink = tmp_path / "old.db"
    older_journal(sink)
    before = fingerprint(sink)
    PipelineConfig.from_toml(_pipeline_file(tmp_path, f'sink = "sqlite:///{sink}"\n'))
    assert fingerprint(sink) == before


def test_a_sink_of_an_application_is_only_read_by_the_check(tmp_path: Path) -> None:
    """An existing database, ordo's tables or not, is a sink: read, not changed, by the check."""
    from ordo.spark.pipeline import PipelineConfig

    app = tmp_path / "app.db"
    with closing(sqlite3.connect(app)) as conn, conn:
        conn.execute("CREATE TABLE totals (pid TEXT PRIMARY KEY)")
    before = fingerprint(app)
    config = PipelineConfig.from_toml(_pipeline_file(tmp_path, f'sink = "sqlite:///{app}"\n'))
    assert config.sink == f"sqlite:///{app}"
    assert fingerprint(app) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db", "pipeline.toml", "shop.db"]


def _pipeline_file(tmp_path: Path, extra: str, *, checkpoint: str | None = None) -> Path:
    """A pipeline file for an existing, empty journal, with `extra` after its required keys."""
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    open_journal(url).close()
    config = tmp_path / "pipeline.toml"
    config.write_text(
        f'[pipeline]\njournal = "{url}"\ntag = "order"\nprocessor = "totals"\n'
        'handler = "ordo.spark.demo:count_order_events"\n'
        f'checkpoint = "{checkpoint or tmp_path / "checkpoint"}"\n{extra}',
        encoding="utf-8",
    )
    return config


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ('dead_letters = "false"\n', "[pipeline] dead_letters must be a boolean (true or false)"),
        ("segments = 0\n", "[pipeline] segments must be in 1..1024, got 0"),
        ("segments = -2\n", "[pipeline] segments must be in 1..1024, got -2"),
        ("segments = 1025\n", "[pipeline] segments must be in 1..1024, got 1025"),
        ('segments = "abc"\n', "[pipeline] segments must be an integer, got 'abc'"),
        ("segments = 2.7\n", "[pipeline] segments must be an integer, got 2.7"),
        ("segments = true\n", "[pipeline] segments must be an integer, got True"),
        ("sink = 1\n", "[pipeline] sink must be a non-empty string, got 1"),
        ('sink = " "\n', "[pipeline] sink must be a non-empty string, got ' '"),
        ('sink = "mysql://db/shop"\n', "[pipeline] sink: unknown sink URL scheme 'mysql'"),
        ('sink = "postgresql://[db/shop"\n', "[pipeline] sink: malformed sink URL: Invalid IPv6"),
        (
            'sink = "sqlite:///no/such/folder/sink.db"\n',
            "[pipeline] sink 'sqlite:///no/such/folder/sink.db': there is no folder no/such/folder",
        ),
        (
            "[source]\nmaxEventsPerTrigger = 0\n",
            "option maxEventsPerTrigger must be in 1..9007199254740991, got 0",
        ),
        ('trigger = "bogus"\n', "trigger must be 'available_now' or a processing time"),
        ('trigger = "1 month"\n', "trigger must be 'available_now' or a processing time"),
        ('trigger = "1.5 minutes"\n', "trigger must be 'available_now' or a processing time"),
        (  # Spark's interval parser overflowed once it had started
            'trigger = "15250285 weeks"\n',
            "trigger '15250285 weeks' in milliseconds is too large: at most 9007199254740991",
        ),
        (
            'trigger = "1 day 9007199254740 seconds"\n',
            "in milliseconds is too large: at most 9007199254740991 (2**53 - 1), got 90071993411",
        ),
        (
            "[source]\nbogusOption = 1\n",
            "ordo_events_by_tag has unknown option 'bogusOption'; option names are case-insen",
        ),
        ('[source]\npageSize = "many"\n', "option pageSize must be an integer, got 'many'"),
        ("[source]\npageSize = 1.5\n", "[source] pageSize must be a string or an integer"),
        ("[source]\nSegments = 2\n", "[source] cannot set Segments: [pipeline] sets"),
        (
            "[sources]\neventualConsistencyDelayMs = 0\n",
            "has unknown table 'sources' (valid tables: pipeline, source)",
        ),
    ],
)
def test_a_bad_pipeline_value_is_one_error_line_before_spark_starts(
    runner: CliRunner, tmp_path: Path, extra: str, needle: str
) -> None:
    config = _pipeline_file(tmp_path, extra)
    code, _, err = _run(runner, "pipeline", "run", str(config))
    assert code == 1
    assert err.startswith("Error: ConfigurationError: ")
    assert err.count("\n") == 1  # no "starting Spark" line: the check came first
    assert needle in err
    assert not (tmp_path / "checkpoint").exists()


def test_a_pipeline_takes_its_claim_timeout_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ORDO_CLAIM_TIMEOUT_MS was ignored: the projection took a claim for expired after 10 s."""
    from ordo.spark.pipeline import PipelineConfig, projection_spec

    monkeypatch.setenv("ORDO_CLAIM_TIMEOUT_MS", "60000")
    spec = projection_spec(PipelineConfig.from_toml(_pipeline_file(tmp_path, "")))
    assert spec.claim_timeout == timedelta(minutes=1)


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("0", "ORDO_CLAIM_TIMEOUT_MS: claim_timeout must be a duration > 0, got 0 ms"),
        ("soon", "ORDO_CLAIM_TIMEOUT_MS: 'soon' is not a whole number of milliseconds"),
    ],
)
def test_a_bad_claim_timeout_variable_is_one_error_line_before_spark_starts(
    runner: CliRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    value: str,
    needle: str,
) -> None:
    config = _pipeline_file(tmp_path, "")
    monkeypatch.setenv("ORDO_CLAIM_TIMEOUT_MS", value)
    code, _, err = _run(runner, "pipeline", "run", str(config))
    assert code == 1
    assert err == f"Error: ConfigurationError: {needle}\n"
    assert not (tmp_path / "checkpoint").exists()


def test_a_pipeline_asking_another_bucket_size_than_the_journals_fails_before_spark_starts(
    runner: CliRunner, tmp_path: Path
) -> None:
    config = _pipeline_file(tmp_path, '[source]\nbucketSize = "day"\n')
    with open_journal(f"sqlite:///{tmp_path / 'shop.db'}") as journal:  # hourly buckets
        journal.append("order-1", [NewEvent.of(1, tags=["order"])])
    code, _, err = _run(runner, "pipeline", "run", str(config))
    assert code == 1
    assert err == (
        "Error: BucketSizeMismatchError: journal records bucket_size=hour, cannot open "
        "it with bucket_size=day (the bucket size recorded by `ordo init` or the first write "
        "never changes); "
        "set the option bucketSize (or ORDO_BUCKET_SIZE) to hour\n"
    )
    assert not (tmp_path / "checkpoint").exists()


@pytest.mark.parametrize(
    "checkpoint",
    [
        "{file}/checkpoint",
        "file://{file}/checkpoint",
        "{file}",
        "{file.parent}/missing/../{file.name}/checkpoint",  # Spark takes .. away by the name
        "file://{file.parent}/missing/../{file.name}/checkpoint",
    ],
)
def test_a_checkpoint_spark_cannot_create_is_one_error_line_before_spark_starts(
    runner: CliRunner, tmp_path: Path, checkpoint: str
) -> None:
    """Spark found out only once it had started, in a Java stack trace of a hundred lines."""
    file = tmp_path / "handlers.py"
    file.write_text("def count(event, context):\n    pass\n", encoding="utf-8")
    given = checkpoint.format(file=file)
    config = _pipeline_file(tmp_path, "", checkpoint=given)
    code, _, err = _run(runner, "pipeline", "run", str(config))
    assert code == 1
    assert err == (
        f"Error: ConfigurationError: {config}: [pipeline] checkpoint {given!r}: "
        f"{file} is not a folder\n"
    )
    assert file.is_file()


@pytest.mark.parametrize(
    ("checkpoint", "problem"),
    [
        ("file:checkpoint", "a file: URI needs an absolute path, as in file:///path"),
        ("file://host/tmp/checkpoint", "a file: URI takes no host ('host'), as in file:///path"),
        ("file://localhost/tmp/checkpoint", "a file: URI takes no host ('localhost'), as in "),
        ("check\\u0000point", "a path cannot hold a NUL character"),
        ("hdfs://[namenode/checkpoint", "Invalid IPv6 URL"),  # was urlsplit's traceback
    ],
)
def test_a_checkpoint_uri_spark_refuses_is_one_error_line_before_spark_starts(
    runner: CliRunner, tmp_path: Path, checkpoint: str, problem: str
) -> None:
    """Spark refused these only once it had started (URISyntaxException, Wrong FS, ...)."""
    config = _pipeline_file(tmp_path, "", checkpoint=checkpoint)
    code, _, err = _run(runner, "pipeline", "run", str(config))
    assert code == 1
    assert err.startswith(f"Error: ConfigurationError: {config}: [pipeline] checkpoint ")
    assert err.count("\n") == 1
    assert problem in err


def test_a_file_uri_checkpoint_is_checked_as_spark_reads_it(tmp_path: Path) -> None:
    """Spark does not percent-decode a file: URI's path: `h%2Epy` is a folder of that name.

    The check decoded it, and refused a checkpoint Spark would have created, next to a file.
    """
    from ordo.spark.pipeline import PipelineConfig

    (tmp_path / "h.py").write_text("", encoding="utf-8")
    checkpoint = f"file://{tmp_path}/h%2Epy/checkpoint"
    config = PipelineConfig.from_toml(_pipeline_file(tmp_path, "", checkpoint=checkpoint))
    assert config.checkpoint == checkpoint
    assert not (tmp_path / "h%2Epy").exists()


def test_a_pipeline_of_an_older_journal_leaves_it_as_it_is(
    runner: CliRunner, tmp_path: Path
) -> None:
    """The source only reads: an older schema is refused, not upgraded, before Spark starts."""
    journal = tmp_path / "old.db"
    older_journal(journal)
    before = fingerprint(journal)
    config = _pipeline_file(tmp_path, "")
    text = config.read_text(encoding="utf-8").replace(str(tmp_path / "shop.db"), str(journal))
    config.write_text(text, encoding="utf-8")
    code, _, err = _run(runner, "pipeline", "run", str(config))
    assert code == 1
    assert err.startswith(f"Error: SchemaVersionError: journal schema version {LATEST - 1} is ")
    assert err.count("\n") == 1
    assert fingerprint(journal) == before
    assert stored_version(journal) == LATEST - 1
    assert not (tmp_path / "checkpoint").exists()


def test_a_pipeline_starting_after_a_future_offset_fails_before_spark_starts(
    runner: CliRunner, tmp_path: Path
) -> None:
    """It failed once Spark had started, leaving a checkpoint, naming a back-tracked offset."""
    future = TimeUUID.min_for_epoch_ns(time.time_ns() + 365 * 24 * 3600 * 10**9)
    config = _pipeline_file(tmp_path, f'[source]\nstartingOffsets = "{future}"\n')
    code, _, err = _run(runner, "pipeline", "run", str(config))
    assert code == 1
    assert err.startswith(f"Error: FutureOffsetError: option startingOffsets: offset {future} (")
    assert err.count("\n") == 1  # no "starting Spark" line
    assert not (tmp_path / "checkpoint").exists()


@pytest.mark.spark
def test_spark_refusing_to_start_a_pipeline_is_one_error_line(
    runner: CliRunner, tmp_path: Path, spark: SparkSession
) -> None:
    """A checkpoint URI of a file system Spark does not know: refused by Spark as it starts."""
    config = _pipeline_file(tmp_path, "", checkpoint="bogus://nowhere/checkpoint")
    code, _, err = _run(runner, "pipeline", "run", str(config))
    assert code == 1
    assert err == (
        "Error: QueryFailedError: pipeline 'totals' failed: "
        'UnsupportedFileSystemException: No FileSystem for scheme "bogus"\n'
    )


def test_a_binary_pipeline_file_is_one_error_line_naming_it(
    runner: CliRunner, tmp_path: Path
) -> None:
    config = tmp_path / "pipeline.toml"
    config.write_bytes(b"\xff\xfe[pipeline]\n")
    code, _, err = _run(runner, "pipeline", "run", str(config))
    assert code == 1
    assert err.startswith(f"Error: ConfigurationError: cannot read pipeline file {config}: ")
    assert err.count("\n") == 1


def test_a_pipeline_file_that_starts_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    """Some editors start UTF-8 files with one: it was 'Invalid statement (at line 1)'."""
    from ordo.spark.pipeline import PipelineConfig

    config = _pipeline_file(tmp_path, "")
    config.write_bytes("\ufeff".encode() + config.read_bytes())
    assert PipelineConfig.from_toml(config).tag == "order"


@pytest.mark.parametrize(
    ("trigger", "parsed"),
    [
        ("available-now", "available_now"),
        ("Available_Now", "available_now"),
        ("1 second", "1 second"),
        ("1.5 seconds", "1.5 seconds"),
        ("interval 1 minute 30 seconds", "interval 1 minute 30 seconds"),
        ("500 Milliseconds", "500 Milliseconds"),
        (" available_now ", "available_now"),  # as " 1 second " was taken
        ("14892195 weeks 1.5 seconds", "14892195 weeks 1.5 seconds"),  # under 2**53 ms
    ],
)
def test_a_pipeline_file_takes_the_triggers_spark_takes(
    tmp_path: Path, trigger: str, parsed: str
) -> None:
    from ordo.spark.pipeline import PipelineConfig

    config = PipelineConfig.from_toml(_pipeline_file(tmp_path, f'trigger = "{trigger}"\n'))
    assert config.trigger == parsed


def test_a_pipeline_files_defaults_and_source_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ordo.spark.pipeline import PipelineConfig

    monkeypatch.delenv("ORDO_BUCKET_SIZE", raising=False)
    monkeypatch.setenv("ORDO_FIRST_TIME_BUCKET", "20200101T00:00")
    extra = '[source]\neventualConsistencyDelayMs = 0\nstartingOffsets = "latest"\n'
    config = PipelineConfig.from_toml(_pipeline_file(tmp_path, extra))
    assert (config.sink, config.segments, config.dead_letters) == (config.journal, 1, False)
    assert config.source_options() == {
        "bucketSize": "hour",  # resolved from the environment by the command, for the source
        "firstTimeBucket": "20200101T00:00",
        "eventualConsistencyDelayMs": "0",
        "startingOffsets": "latest",
        "journal": config.journal,
        "tag": "order",
        "processor": "totals",
        "segments": "1",
    }
