"""ordo demo and ordo simulate: what they refuse before starting, and their verdicts."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from psycopg.conninfo import make_conninfo

from cli_support import journal_with_one_event as _journal_with_one_event
from cli_support import run as _run
from cli_support import spark_command
from ordo.storage.open import init_storage
from ordo.time import BucketSize
from sqlite_support import LATEST, fingerprint, newer_journal


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
        f"Error: MissingFolderError: no journal at {tmp_path}/nodir/x.db: no folder "
        f"{tmp_path}/nodir (`ordo init` or ordo.init_storage() creates both)\n"
    )
    assert not (tmp_path / "nodir").exists()


@pytest.mark.parametrize("url", [":memory:", "sqlite:///:memory:"])
def test_the_demo_refuses_an_in_memory_journal_before_starting_spark(
    runner: CliRunner, url: str
) -> None:
    """Its check took `:memory:` for a new file: opening it failed once Spark had started."""
    code, out, err = _run(runner, "demo", "--events", "10", "--journal", url)
    assert (code, out) == (1, "")
    assert err == (
        "Error: StorageAccessError: cannot open SQLite journal :memory:: an in-memory "
        "database cannot be a journal (it cannot be in WAL mode)\n"
    )


@pytest.mark.parametrize("bucket_size", [BucketSize.MINUTE, BucketSize.DAY])
def test_the_demo_refuses_a_journal_of_another_bucket_size_before_starting_spark(
    runner: CliRunner, tmp_path: Path, bucket_size: BucketSize
) -> None:
    """An empty journal `ORDO_BUCKET_SIZE=day ordo init` made passed the check: once Spark had
    started (a minute), the demo added its tables, tokens and change triggers, and then its
    source failed, advising ORDO_BUCKET_SIZE, which the demo does not read."""
    path = tmp_path / "j.db"
    init_storage(str(path), bucket_size=bucket_size)
    before = fingerprint(path)
    code, out, err = _run(runner, "demo", "--events", "10", "--journal", f"sqlite:///{path}")
    assert (code, out) == (1, "")
    assert err == (
        f"Error: BucketSizeMismatchError: journal records bucket_size={bucket_size}, cannot "
        "open it with bucket_size=hour (the bucket size recorded by `ordo init` or the first "
        "write never changes); the demo writes hour buckets: name a new journal\n"
    )
    assert fingerprint(path) == before


def _demo_whose_spark_does_not_start(url: str, tmp_path: Path) -> None:
    """Run `ordo demo --master local[0]` on `url`, in a process of its own (its first Spark
    session is this one), and check that it fails as Spark refuses the master (no threads)."""
    demo = spark_command(
        "demo", "--journal", url, "--master", "local[0]", spark_log=tmp_path / "spark.log"
    )
    assert demo.returncode == 1
    assert demo.stderr.splitlines()[-1].startswith(
        "Error: ConfigurationError: Spark did not start with master 'local[0]': "
    )


def test_a_demo_whose_spark_does_not_start_leaves_no_journal_behind(tmp_path: Path) -> None:
    """The journal was created, with ordo's tables, before Spark refused the master."""
    url = f"sqlite:///{tmp_path}/new.db"
    _demo_whose_spark_does_not_start(url, tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["spark.log"]


def test_the_demo_announces_sparks_output_file_as_it_is_named(tmp_path: Path) -> None:
    """The announcement went through rich's console markup: an ORDO_SPARK_LOG of `[/x].log`
    ended the demo with rich's MarkupError, before Spark said the file could not be written."""
    (tmp_path / "file").write_text("a file where ORDO_SPARK_LOG wants a directory")
    spark_log = tmp_path / "file" / "[/x]:smile:.log"
    demo = spark_command("demo", "--journal", f"sqlite:///{tmp_path}/new.db", spark_log=spark_log)
    assert demo.returncode == 1
    announcement, error = demo.stderr.splitlines()
    assert announcement == f"starting Spark (its own output goes to {spark_log}) ..."
    assert error.startswith(
        f"Error: ConfigurationError: ORDO_SPARK_LOG: cannot write Spark's output to {spark_log}: "
    )


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
def test_the_demo_runs_the_pipeline_in_its_own_folder_and_its_verdict_is_clean(
    tmp_path: Path,
) -> None:
    """The default journal is `.ordo/demo.db`, and `.ordo` is the demo's own folder: it makes
    it, as nothing that opens an SQLite file makes folders. In a process of its own started in
    `tmp_path`: the shared session's executors resolve a relative path in the tests' folder."""
    # 300 events: the writers still write after the first micro-batch, and the split comes
    # while the stream runs (five times as many proved nothing more, for 3 s)
    args = ("--events", "300", "--writers", "2", "--json", "--master", "local[2]")
    demo = spark_command("demo", *args, spark_log=tmp_path / "spark.log", cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    assert (tmp_path / ".ordo" / "demo.db").is_file()
    result = json.loads(demo.stdout.strip().splitlines()[-1])
    assert result["events"] == 300
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
    (line,) = err.splitlines()  # the progress display stopped unstarted printed an empty line
    if kind == "not a journal":
        assert line.startswith("Error: StorageAccessError")
    else:  # the command's own flag, not the variable the other commands read
        assert line.startswith("Error: BucketSizeMismatchError")
        assert line.endswith("; run with --bucket-size hour")


def test_simulate_refuses_bad_options(runner: CliRunner) -> None:
    code, _, err = _run(runner, "simulate", "--writers", "0")
    assert code == 2
    assert "--writers" in err


@pytest.mark.parametrize("value", ["inf", "Infinity", "1e999"])
def test_simulate_refuses_an_infinite_rate_as_a_usage_error(runner: CliRunner, value: str) -> None:
    """`--rate inf` is above the bound of 1: it ran unpaced."""
    code, out, err = _run(runner, "simulate", "--rate", value, "--events", "20")
    assert (code, out) == (2, "")
    assert err == (
        f"Error: Invalid value for '--rate': {value!r} is not a finite number; "
        "see 'ordo simulate --help'\n"
    )


@pytest.mark.parametrize("option", ["--rate", "--delay-probability", "--handovers"])
def test_simulate_refuses_a_nan_as_a_usage_error(runner: CliRunner, option: str) -> None:
    """nan compares false with a range's bounds: `--rate nan` ran unpaced and exited 0."""
    code, out, err = _run(runner, "simulate", option, "nan", "--events", "20")
    assert (code, out) == (2, "")
    assert err == (
        f"Error: Invalid value for '{option}': 'nan' is not a number; see 'ordo simulate --help'\n"
    )
