"""`ordo cdc` on the embedded default: schemas, capture from SQLite, ingest, bad input."""

from __future__ import annotations

import json
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

from cli_support import spark_command
from ordo.cdc import Audit, Cell, Mutation, mutation_to_json, partition_of
from ordo.cli.main import cli
from ordo.simulation.cdc import SIMULATED_SCHEMA, ReplicaWorkload, replica_mutations
from ordo.storage.change_sources import change_source_at
from ordo.storage.open import stores_at
from ordo.storage.parquet import ParquetChangeLog
from ordo.storage.postgres.change_source import PostgresChangeSource


def _run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), input=stdin)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def journal(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ordo.db'}"


def test_capture_publishes_a_snapshot_and_the_changes_of_sqlite_tables(
    tmp_path: Path, journal: str
) -> None:
    source = tmp_path / "shop.db"
    with sqlite3.connect(source) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, qty INTEGER)")
        conn.executemany("INSERT INTO items VALUES (?, ?, ?)", [(i, f"i{i}", i) for i in range(5)])
    log = tmp_path / "log"
    args = ("cdc", "capture", str(source), "--table", "items", "--journal", journal)
    code, out, err = _run(*args, "--change-log", str(log), "--snapshot")
    assert code == 0, err
    assert "snapshot items: 5 rows" in err
    assert out == (
        "published a snapshot of items=5, then no changes (skipped 0 already in the log)\n"
    )
    with sqlite3.connect(source) as conn:
        conn.execute("UPDATE items SET qty = 99 WHERE id = 3")
    code, out, err = _run(*args, "--change-log", str(log))
    assert code == 0
    assert out.strip() == "published items=1 (skipped 0 already in the log)"
    assert err.startswith("capturing: published items=1, up to ")
    mutations = list(ParquetChangeLog(log).read("items"))
    assert len(mutations) == 6
    assert sum(m.audit.is_snapshot for m in mutations) == 5

    code, out, _ = _run("cdc", "schemas", "list", "--journal", journal, "--json")
    assert [(v["table"], v["version"], v["accepted"]) for v in json.loads(out)] == [
        ("items", 1, True)
    ]
    code, out, _ = _run("cdc", "status", "--journal", journal, "--change-log", str(log), "--json")
    assert code == 0
    assert json.loads(out)["change_logs"][0]["mutations"] == 6
    code, out, err = _run("cdc", "schemas", "list", "itmes", "--journal", journal)
    assert (code, out) == (0, "")
    assert err == "no schemas registered for table 'itmes' (tables with schemas: items)\n"


def test_ctrl_c_ends_a_followed_capture_with_one_line_and_status_130(
    tmp_path: Path, journal: str
) -> None:
    source = tmp_path / "shop.db"
    with sqlite3.connect(source) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)")
    args = ["cdc", "capture", str(source), "--table", "items", "--journal", journal]
    args += ["--change-log", str(tmp_path / "log")]
    assert _run(*args)[0] == 0  # installs the triggers: the next change is captured
    capture = _started(*args, "--follow", "--flush-interval-ms", "50")
    try:
        with sqlite3.connect(source) as conn:
            conn.execute("INSERT INTO items VALUES (1, 'x')")
        assert capture.stderr is not None
        assert capture.stderr.readline().startswith("capturing: published items=1")
        _interrupt(capture)
    finally:
        capture.kill()
        capture.wait()


def _started(*args: str) -> subprocess.Popen[str]:
    """`ordo ARGS` in a process of its own, which prints its threads' stacks on SIGABRT.

    It inherits the environment, PYTHONPATH included.
    """
    return subprocess.Popen(
        [sys.executable, "-m", "ordo.cli.main", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
    )


def _interrupt(capture: subprocess.Popen[str]) -> None:
    """Ctrl-C the capture: it must end with its one line and status 130 within 30 s."""
    capture.send_signal(signal.SIGINT)
    try:
        out, err = capture.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        # Seen once in a full CI run (not reproduced alone): show where every thread of the
        # capture was (faulthandler prints them on SIGABRT) instead of only the timeout.
        capture.send_signal(signal.SIGABRT)
        _, err = capture.communicate()
        pytest.fail(f"the capture did not end within 30 s of Ctrl-C; its threads:\n{err}")
    assert (capture.returncode, out, err) == (
        130,
        "",
        "capture interrupted; everything published is durable\n",
    )


def test_ingest_needs_a_schema_and_rejects_a_malformed_line_whole(
    tmp_path: Path, journal: str
) -> None:
    lines = [
        json.dumps(mutation_to_json(m))
        for m in replica_mutations(ReplicaWorkload(mutations=30, keys=5, replicas=3))
    ]
    log = str(tmp_path / "log")
    ingest = ("cdc", "ingest", "--journal", journal, "--change-log", log)
    code, _, err = _run(*ingest, stdin="\n".join(lines))
    assert code == 1
    assert err.startswith("Error: StorageUnavailableError: no journal at")
    assert not (tmp_path / "ordo.db").exists()

    assert _run("init", "--journal", journal)[0] == 0
    code, _, err = _run(*ingest, stdin="\n".join(lines))
    assert code == 1
    assert "UnknownSchemaError" in err

    schema_file = tmp_path / "readings.json"
    schema_file.write_text(SIMULATED_SCHEMA.to_json())
    code, out, _ = _run("cdc", "schemas", "register", str(schema_file), "--journal", journal)
    assert code == 0
    assert out.startswith("readings v1")

    broken = "\n".join([*lines[:3], "{not json", *lines[3:]])
    code, _, err = _run("cdc", "ingest", "--journal", journal, "--change-log", log, stdin=broken)
    assert code == 1
    assert "MalformedMutationError: line 4" in err
    assert not (tmp_path / "log").exists()

    code, out, _ = _run(
        "cdc", "ingest", "--journal", journal, "--change-log", log, stdin="\n".join(lines)
    )
    assert code == 0
    assert out.strip() == f"stdin: published {len(lines)}, skipped 0"


def _registered(tmp_path: Path, journal: str) -> tuple[str, ...]:
    """An initialized journal with the simulated `readings` schema; the ingest command for it."""
    assert _run("init", "--journal", journal)[0] == 0
    schema_file = tmp_path / "readings.json"
    schema_file.write_text(SIMULATED_SCHEMA.to_json())
    assert _run("cdc", "schemas", "register", str(schema_file), "--journal", journal)[0] == 0
    return ("cdc", "ingest", "--journal", journal, "--change-log", str(tmp_path / "log"))


def _readings(**audit: object) -> str:
    """One JSON line writing a `readings` row, with `audit` fields replaced."""
    document = mutation_to_json(
        Mutation(
            table="readings",
            partition_key=(1,),
            clustering_key=(2,),
            cells={"label": Cell(value="ok", write_time=5)},
            audit=Audit(source="test", segment="seg", position=1),
        )
    )
    assert isinstance(document["audit"], dict)
    document["audit"].update(audit)
    return json.dumps(document)


def _one_line_error(code: int, err: str, problem: str) -> None:
    assert code == 1
    assert err.startswith("Error: ")
    assert err.count("\n") == 1
    assert problem in err


_READINGS = json.loads(SIMULATED_SCHEMA.to_json())
_EXTRA = {"name": "extra", "type": "string"}


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        (
            {**_READINGS, "columns": [*_READINGS["columns"], {**_EXTRA, "nullable": "yes"}]},
            "InvalidSchemaError: column 'extra': 'nullable' must be true or false, got 'yes'",
        ),
        (
            {**_READINGS, "columns": [*_READINGS["columns"], {**_EXTRA, "default": ""}]},
            "column 'extra' has unknown key 'default' (valid keys: name, type, nullable)",
        ),
        (
            {**_READINGS, "comment": "v2"},
            "the schema document has unknown key 'comment' (valid keys: table, columns, ",
        ),
        (
            {**_READINGS, "columns": [*_READINGS["columns"], {**_EXTRA, "type": "uuid"}]},
            "type 'uuid' is not one of string, long, double, boolean, decimal, timestamp, ",
        ),
        ({k: v for k, v in _READINGS.items() if k != "table"}, "is missing key 'table'"),
        ([_READINGS], "the schema document must be a JSON object, got [{"),
    ],
)
def test_schemas_register_refuses_a_bad_document_and_stores_no_version(
    tmp_path: Path, journal: str, document: object, problem: str
) -> None:
    _registered(tmp_path, journal)
    schema_file = tmp_path / "v2.json"
    schema_file.write_text(json.dumps(document))
    code, _, err = _run("cdc", "schemas", "register", str(schema_file), "--journal", journal)
    _one_line_error(code, err, problem)
    code, out, _ = _run("cdc", "schemas", "list", "--journal", journal, "--json")
    assert [v["version"] for v in json.loads(out)] == [1]


def test_schemas_register_names_a_file_that_is_not_text(tmp_path: Path, journal: str) -> None:
    assert _run("init", "--journal", journal)[0] == 0
    schema_file = tmp_path / "schema.json"
    schema_file.write_bytes(b"\xff\xfe\x00{}")
    code, _, err = _run("cdc", "schemas", "register", str(schema_file), "--journal", journal)
    _one_line_error(code, err, f"InvalidSchemaError: {schema_file}: not a text file: ")


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (
            _readings()[:-1] + ', "bogus": 1}',
            "line 2 of {file}: the mutation has unknown key 'bogus' (valid keys: table, ",
        ),
        (
            _readings(position=-13),
            "line 2 of {file}: audit field 'position' must be an integer >= 0, got -13",
        ),
        (
            _readings().replace('"ok"', "NaN"),
            "line 2 of {file}: NaN is not a JSON number (JSON has no NaN or infinities)",
        ),
        (
            _readings().replace('"partition_key": [1]', '"partition_key": [-Infinity]'),
            "line 2 of {file}: -Infinity is not a JSON number",
        ),
        (_readings().replace('"ok"', "1e999"), "line 2 of {file}: number 1e999 is out of the"),
        (
            _readings().replace('"readings"', '"unregistered"'),
            "UnknownSchemaError: line 2 of {file}: no schema is registered for table "
            "'unregistered'",
        ),
        (
            _readings().replace('"ok"', '"\\ud800"'),
            "MalformedMutationError: {file}: mutation of table 'readings' key (1, 2): ",
        ),
        (
            _readings(segment="seg\x00"),
            "MalformedMutationError: {file}: audit segment 'seg\\x00' contains a NUL character",
        ),
    ],
)
def test_ingest_checks_every_file_before_it_publishes_any(
    tmp_path: Path, journal: str, line: str, problem: str
) -> None:
    ingest = _registered(tmp_path, journal)
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_text(_readings() + "\n")
    bad.write_text(f"{_readings(position=2)}\n{line}\n")
    code, _, err = _run(*ingest, str(good), str(bad))
    _one_line_error(code, err, problem.format(file=bad))
    assert not (tmp_path / "log").exists()

    code, out, err = _run(*ingest, str(good))
    assert code == 0, err
    assert out == f"{good}: published 1, skipped 0\n"


def test_ingest_names_a_file_that_is_not_text(tmp_path: Path, journal: str) -> None:
    ingest = _registered(tmp_path, journal)
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\x00{}")
    code, _, err = _run(*ingest, str(binary))
    _one_line_error(code, err, f"MalformedMutationError: {binary}: not a text file: ")
    assert not (tmp_path / "log").exists()


def test_ingest_keeps_every_mutation_without_a_position_where_spark_sees_it(
    tmp_path: Path, journal: str
) -> None:
    ingest = _registered(tmp_path, journal)
    unpositioned = tmp_path / "unpositioned.jsonl"
    unpositioned.write_text(_readings(segment=None, position=None) + "\n")
    for _ in range(2):
        code, out, err = _run(*ingest, str(unpositioned))
        assert code == 0, err
        assert out == f"{unpositioned}: published 1, skipped 0\n"
    files = list((tmp_path / "log" / "readings").glob("partition=*/*"))
    assert len(files) == 2
    assert not [f for f in files if f.name.startswith(("_", "."))]  # Spark skips those


def _log_files(log: Path) -> dict[str, bytes]:
    """Every file of a change log with its content: what a refused command leaves as it was."""
    return {str(f.relative_to(log)): f.read_bytes() for f in log.rglob("*") if f.is_file()}


def test_ingest_refuses_another_partition_count_and_follows_the_log_without_one(
    tmp_path: Path, journal: str
) -> None:
    ingest = _registered(tmp_path, journal)
    log = tmp_path / "log"
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text(_readings() + "\n")
    second.write_text(_readings(position=2) + "\n")
    for expected in ("published 1, skipped 0", "published 0, skipped 1"):
        code, out, err = _run(*ingest, str(first))
        assert (code, out) == (0, f"{first}: {expected}\n"), err
    before = _log_files(log)
    for given in (first, second):
        code, out, err = _run(*ingest, "--partitions", "3", str(given))
        _one_line_error(
            code,
            err,
            "PartitionCountMismatchError: table 'readings': its change log has 8 partitions, a "
            "publish with 3 is refused (a key's changes must stay in one partition): use "
            "--partitions 8 (partitions=8), or leave it out to follow the log",
        )
        assert out == ""
    assert _log_files(log) == before

    code, out, err = _run(*ingest, "--partitions", "8", str(first), str(second))
    assert (code, out) == (
        0,
        f"{first}: published 0, skipped 1\n{second}: published 1, skipped 0\n",
    )
    assert [p.parent.name for p in sorted((log / "readings").glob("*/*.parquet"))] == [
        f"partition={partition_of((1,), 8)}"
    ] * 2

    other = tmp_path / "other"  # a log started with 3 partitions is followed by plain ingests
    for args in (("--partitions", "3", str(first)), (str(second),)):
        code, _, err = _run(*ingest[:-1], str(other), *args)
        assert code == 0, err
    assert [p.parent.name for p in sorted((other / "readings").glob("*/*.parquet"))] == [
        f"partition={partition_of((1,), 3)}"
    ] * 2


def test_capture_refuses_another_partition_count_before_it_changes_the_source(
    tmp_path: Path, journal: str
) -> None:
    source, fresh = tmp_path / "shop.db", tmp_path / "fresh.db"
    for path in (source, fresh):
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, qty INTEGER)")
            conn.executemany("INSERT INTO items VALUES (?, ?)", [(i, i) for i in range(5)])
    log = tmp_path / "log"
    capture = ("cdc", "capture", "--table", "items", "--journal", journal, "--change-log", str(log))
    code, _, err = _run(*capture, str(source), "--snapshot", "--partitions", "4")
    assert code == 0, err
    with sqlite3.connect(source) as conn:
        conn.execute("UPDATE items SET qty = 99 WHERE id = 3")
    before = _log_files(log)

    for path in (source, fresh):
        code, out, err = _run(*capture, str(path), "--partitions", "3")
        _one_line_error(
            code, err, "PartitionCountMismatchError: table 'items': its change log has 4 partitions"
        )
        assert "use --partitions 4 (partitions=4)" in err
    assert _log_files(log) == before
    with sqlite3.connect(fresh) as conn:  # refused before its change triggers were installed
        names = [row[0] for row in conn.execute("SELECT name FROM sqlite_master")]
    assert names == ["items"]

    code, out, err = _run(*capture, str(source))  # the log's count, and the change kept for it
    assert code == 0, err
    assert out.strip() == "published items=1 (skipped 0 already in the log)"
    changed = [
        f
        for f in (log / "items").glob("partition=*/*.parquet")
        if str(f.relative_to(log)) not in before
    ]
    assert [f.parent.name for f in changed] == [f"partition={partition_of((3,), 4)}"]


@pytest.mark.parametrize("table", ["items", "nosuch"])
def test_capture_from_a_bad_source_leaves_no_journal_behind(tmp_path: Path, table: str) -> None:
    source = tmp_path / "shop.db"
    if table == "nosuch":
        with sqlite3.connect(source) as conn:
            conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY)")
    journal = tmp_path / "new.db"
    code, _, err = _run("cdc", "capture", str(source), "--table", table, "--journal", str(journal))
    _one_line_error(code, err, "CaptureError: ")
    assert not journal.exists()


def test_materialize_refuses_a_table_or_change_log_it_cannot_find_before_spark_starts(
    tmp_path: Path, journal: str
) -> None:
    _registered(tmp_path, journal)
    log, misspelt = tmp_path / "log", tmp_path / "lgo"
    log.mkdir()
    checkpoint = tmp_path / "checkpoint"
    materialize = ("cdc", "materialize", "--journal", journal, "--checkpoint", str(checkpoint))
    code, _, err = _run(*materialize, "--change-log", str(log), "nosuch")
    _one_line_error(code, err, "UnknownSchemaError: no schema is registered for table 'nosuch'")
    assert err.rstrip().endswith(  # ingestion needs a schema too: it cannot come first
        ": capture the table (`ordo cdc capture` registers its schema), or declare its schema "
        "(`ordo cdc schemas register`) and ingest its changes (`ordo cdc ingest`); or check "
        "the table's name"
    )
    code, _, err = _run(*materialize, "--change-log", str(misspelt), "readings")
    _one_line_error(
        code, err, f"ConfigurationError: no change log of table 'readings' in {misspelt}"
    )
    code, _, err = _run(*materialize, "--change-log", str(misspelt), "readings", "--follow")
    _one_line_error(code, err, f"ConfigurationError: no change log directory {misspelt}")
    assert not misspelt.exists()
    assert not checkpoint.exists()


@pytest.mark.parametrize(
    ("master", "spark_log", "problem"),
    [
        ("bogus://x", "spark.log", "Spark did not start with master 'bogus://x': SparkException: "),
        ("local[0]", "spark.log", "Spark did not start with master 'local[0]': SparkException: "),
        ("local[1]", "file/spark.log", "ORDO_SPARK_LOG: cannot write Spark's output to "),
    ],
)
def test_materialize_says_in_one_line_why_spark_did_not_start(
    tmp_path: Path, journal: str, master: str, spark_log: str, problem: str
) -> None:
    _registered(tmp_path, journal)
    (tmp_path / "log" / "readings").mkdir(parents=True)
    (tmp_path / "file").write_text("a file where ORDO_SPARK_LOG wants a directory")
    logs = ("--change-log", str(tmp_path / "log"), "--checkpoint", str(tmp_path / "checkpoint"))
    args = ("cdc", "materialize", "readings", "--master", master, "--journal", journal, *logs)
    materialize = spark_command(*args, spark_log=tmp_path / spark_log)
    assert materialize.returncode == 1
    assert "Traceback" not in materialize.stderr
    assert materialize.stderr.splitlines()[-1].startswith(f"Error: ConfigurationError: {problem}")


@pytest.mark.parametrize("command", [("cdc", "capture"), ("cdc", "status", "--source")])
def test_a_source_that_is_not_sqlite_is_one_line(
    tmp_path: Path, journal: str, command: tuple[str, ...]
) -> None:
    assert _run("init", "--journal", journal)[0] == 0
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database\n" * 100)
    code, _, err = _run(*command, str(notes), "--table", "items", "--journal", journal)
    _one_line_error(code, err, f"CaptureError: cannot read {notes} as an SQLite database: ")
    assert notes.read_text().startswith("not a database")


@pytest.mark.parametrize("command", [("cdc", "status"), ("status",)])
def test_status_refuses_a_named_change_log_that_is_not_there(
    tmp_path: Path, journal: str, command: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A misspelt --change-log would show "no change logs", as if nothing had been captured."""
    assert _run("init", "--journal", journal)[0] == 0
    monkeypatch.chdir(tmp_path)  # the default, .ordo/changelog, does not exist: no capture yet
    code, out, err = _run(*command, "--journal", journal, "--json")
    assert code == 0, err
    document = json.loads(out)
    assert (document if command[0] == "cdc" else document["cdc"])["change_logs"] == []
    misspelt = tmp_path / "nonexist" / "x"
    code, _, err = _run(*command, "--journal", journal, "--change-log", str(misspelt), "--json")
    _one_line_error(
        code, err, f"ConfigurationError: no change log directory {misspelt}: check --change-log"
    )
    monkeypatch.setenv("ORDO_CDC_CHANGE_LOG", str(misspelt))
    code, _, err = _run(*command, "--journal", journal)
    _one_line_error(code, err, f"no change log directory {misspelt}: check ORDO_CDC_CHANGE_LOG")
    assert not misspelt.parent.exists()


@pytest.mark.parametrize("command", [("cdc", "capture"), ("cdc", "status", "--source")])
def test_a_source_url_of_an_unknown_scheme_is_called_a_source(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """The URL parser is the journal's: its error must name what the URL is for."""
    journal = tmp_path / "ordo.db"
    if command[1] == "status":
        assert _run("init", "--journal", str(journal))[0] == 0
    code, _, err = _run(*command, "mysql://x/y", "--table", "t", "--journal", str(journal))
    _one_line_error(
        code,
        err,
        "UnknownUrlSchemeError: unknown source URL scheme 'mysql' in 'mysql://x/y'; use one of: "
        "sqlite, postgresql, postgres",
    )
    assert journal.exists() == (command[1] == "status")  # a capture creates no journal


def test_capture_refuses_a_table_without_primary_key(tmp_path: Path, journal: str) -> None:
    source = tmp_path / "shop.db"
    with sqlite3.connect(source) as conn:
        conn.execute("CREATE TABLE loose (name TEXT)")
    code, _, err = _run("cdc", "capture", str(source), "--table", "loose", "--journal", journal)
    _one_line_error(
        code,
        err,
        "NoPrimaryKeyError: table 'loose' has no primary key: CDC keys its change log and rows "
        "by it; SQLite cannot add one to an existing table: create it again with a PRIMARY KEY "
        "(and copy its rows over) to capture it",
    )
    assert "schema" not in err  # a captured table's schema is the catalog's: nothing to declare


def test_status_shows_the_journal_processors_and_cdc(journal: str, tmp_path: Path) -> None:
    lines = "\n".join(
        json.dumps({"persistence_id": f"order-{i}", "payload": {"n": i}, "tags": ["order"]})
        for i in range(7)
    )
    assert _run("append", "--journal", journal, stdin=lines)[0] == 0
    with stores_at(journal) as stores:
        stores.tokens.initialize("order-view", segment_count=2)
    (tmp_path / "log").mkdir()  # a named change log directory must exist
    code, out, err = _run(
        "status", "--journal", journal, "--change-log", str(tmp_path / "log"), "--json"
    )
    assert code == 0, err
    document = json.loads(out)
    assert document["journal"]["events"] == 7
    assert document["journal"]["persistence_ids"] == 7
    assert document["journal"]["tags"] == {"order": 7}
    assert document["journal"]["time_buckets"] == 1
    assert document["journal"]["events_per_s"] > 0  # appended within the last minute
    (processor,) = document["processors"]
    assert processor["processor"] == "order-view"
    assert len(processor["segments"]) == 2
    assert (processor["lag_events"], processor["lag_ms"]) == (7, None)  # nothing processed yet
    assert document["cdc"]["change_logs"] == []
    assert document["cdc"]["sources"] == []  # SQLite keeps change tables in each source file
    code, out, _ = _run("status", "--journal", journal)
    assert code == 0
    assert "persistence ids" in out


@pytest.mark.postgres
def test_status_lists_the_wal2json_slots_of_a_postgres_journal(
    postgres_dsn: str, tmp_path: Path
) -> None:
    slot = f"ordo_test_{secrets.token_hex(6)}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id BIGINT PRIMARY KEY, qty BIGINT)")
    try:
        with change_source_at(postgres_dsn, ["items"], slot=slot):
            pass
        assert _run("init", "--journal", postgres_dsn)[0] == 0  # as `ordo cdc capture` does
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute("INSERT INTO items VALUES (1, 2)")
        args = ("status", "--journal", postgres_dsn, "--change-log", str(tmp_path), "--json")
        code, out, err = _run(*args)
        assert code == 0, err
        (found,) = [s for s in json.loads(out)["cdc"]["sources"] if s["name"] == slot]
        assert found["retained_bytes"] > 0
        assert found["lag"] >= 0
    finally:
        with PostgresChangeSource(postgres_dsn, slot=slot, tables=["items"]) as source:
            source.drop()


def test_status_shows_a_change_logs_recorded_partition_count(tmp_path: Path, journal: str) -> None:
    """It counted partition directories: a log of 8 partitions whose one key filled one was
    shown with 1 partition, which is not the `--partitions` a publish must use."""
    ingest = _registered(tmp_path, journal)
    given = tmp_path / "readings.jsonl"
    given.write_text(_readings() + "\n")
    assert _run(*ingest, str(given))[0] == 0
    status = ("cdc", "status", "--journal", journal, "--change-log", str(tmp_path / "log"))

    code, out, err = _run(*status, "--json")

    assert code == 0, err
    (log,) = json.loads(out)["change_logs"]
    assert log["partitions"] == 8
    assert (log["has_partition_record"], log["files"]) == (True, 1)
    assert "1 mutation in 1 file, 8 partitions; last seg@1" in _wide(*status)
    (tmp_path / "log" / "readings" / "_partitions.json").unlink()  # as an earlier ordo wrote it

    code, out, err = _run(*status, "--json")

    assert code == 0, err
    (log,) = json.loads(out)["change_logs"]
    assert (log["partitions"], log["has_partition_record"]) == (1, False)
    assert "1 partition with files (no count recorded); last" in _wide(*status)


def _wide(*args: str) -> str:
    """The output of a command that succeeds, its tables as wide as their rows (no wrapping)."""
    result = CliRunner().invoke(cli, list(args), env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_a_second_capture_of_a_source_is_refused_while_the_first_runs(
    request: pytest.FixtureRequest, tmp_path: Path, journal: str, backend: str
) -> None:
    """Two captures of one source peeked the same changes and both published them.

    Seen with two `--follow` captures of 300 inserts: 355 mutations in the log (SQLite), and 312
    (PostgreSQL) before one of them failed with `StorageUnavailableError: PostgreSQL is
    unavailable: replication slot ... is active for PID N`. The second is refused at once now.
    """
    source, insert, refused = _capture_source(request, tmp_path, backend)
    log = tmp_path / "log"
    args = ["cdc", "capture", *source, "--table", "items", "--journal", journal]
    args += ["--change-log", str(log)]
    assert _run(*args)[0] == 0  # installs the triggers or creates the slot
    with _following(args, insert) as first:
        code, out, err = _run(*args)
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=30)
    _one_line_error(code, err, f"AlreadyRunningError: {refused} (")
    assert f"pid {first.pid} on " in err
    assert out == ""
    positions = [m.audit.position for m in ParquetChangeLog(log).read("items")]
    assert len(positions) == 1


@contextmanager
def _following(args: list[str], insert: Callable[[int], None]) -> Iterator[subprocess.Popen[str]]:
    """`ordo` with `args` and `--follow` running, once it published a first insert; killed after.

    The process inherits the environment, PYTHONPATH included.
    """
    capture = subprocess.Popen(
        [sys.executable, "-m", "ordo.cli.main", *args, "--follow", "--flush-interval-ms", "50"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        insert(1)
        assert capture.stderr is not None
        assert capture.stderr.readline().startswith("capturing: published items=1")
        yield capture
    finally:
        capture.kill()
        capture.wait()


def _capture_source(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> tuple[list[str], Callable[[int], None], str]:
    """A source with an empty `items` table: its arguments (URL, slot), an insert of a row, and
    what a second capture is refused as."""
    if backend == "sqlite":
        path = tmp_path / "shop.db"
        with closing(sqlite3.connect(path)) as conn, conn:
            conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY)")

        def insert_row(key: int) -> None:
            with closing(sqlite3.connect(path)) as conn, conn:
                conn.execute("INSERT INTO items VALUES (?)", (key,))

        return [str(path)], insert_row, f"a capture of {path} is already running"
    dsn: str = request.getfixturevalue("postgres_dsn")
    slot = f"ordo_test_{secrets.token_hex(6)}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id BIGINT PRIMARY KEY)")

    def insert_committed(key: int) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SET synchronous_commit = on")  # decodable at once
            conn.execute("INSERT INTO items VALUES (%s)", (key,))

    def drop_slot() -> None:
        with PostgresChangeSource(dsn, slot=slot, tables=["items"]) as source:
            source.drop()

    request.addfinalizer(drop_slot)
    return [dsn, "--slot", slot], insert_committed, f"a capture of slot {slot!r} is already running"


@pytest.mark.postgres
def test_a_followed_capture_rides_out_the_end_of_its_session(
    request: pytest.FixtureRequest, tmp_path: Path, journal: str
) -> None:
    """`ordo cdc capture --follow` stopped with `Error: StorageUnavailableError: PostgreSQL is
    unavailable: terminating connection due to administrator command`."""
    source, insert, _ = _capture_source(request, tmp_path, "postgres")
    name = f"ordo-test-{secrets.token_hex(4)}"  # the capture's sessions, its lock's included
    url = f"{source[0]}&application_name={name}"
    log = tmp_path / "log"
    args = ["cdc", "capture", url, *source[1:], "--table", "items", "--journal", journal]
    args += ["--change-log", str(log)]
    assert _run(*args)[0] == 0  # creates the slot: the next change is captured
    with _following(args, insert) as capture:
        with psycopg.connect(source[0], autocommit=True) as conn:
            ended = conn.execute(
                "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
                "WHERE application_name = %s OR application_name LIKE %s",
                (name, f"ordo cdc capture pid {capture.pid} on %"),
            ).fetchone()
        assert ended is not None
        assert ended[0] >= 1
        insert(2)
        insert(3)
        deadline = time.monotonic() + 10
        while len(list(ParquetChangeLog(log).read("items"))) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        capture.send_signal(signal.SIGINT)
        _, err = capture.communicate(timeout=30)
    assert capture.returncode == 130, err
    assert "WARNING ordo.cdc.capture: capture unavailable, retrying in 0.1 s (attempt 1" in err
    logged = sorted(ParquetChangeLog(log).read("items"), key=lambda m: m.audit.position)
    assert [m.partition_key for m in logged] == [(1,), (2,), (3,)]


@pytest.mark.postgres
def test_a_followed_capture_ends_at_once_when_the_server_refuses_its_url(
    postgres_server_dsn: str, tmp_path: Path, journal: str
) -> None:
    """It retried a role that may no longer log in as an outage, for --reconnect-timeout-ms.

    The role of its own captures a table in its own schema; made NOLOGIN with its sessions
    ended, the capture's next session is refused: one line and exit status 1, within seconds
    of a reconnect timeout of ten minutes.
    """
    name = f"r_{secrets.token_hex(6)}"
    slot = f"ordo_test_{secrets.token_hex(6)}"
    admin = psycopg.connect(postgres_server_dsn, autocommit=True)
    role = sql.Identifier(name)
    admin.execute(sql.SQL("CREATE ROLE {} LOGIN REPLICATION").format(role))
    admin.execute(sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(role, role))
    parts = urlsplit(postgres_server_dsn)
    url = urlunsplit(
        parts._replace(
            netloc=f"{name}@{parts.hostname}:{parts.port}",
            query=f"options=-csearch_path%3D{name}",
        )
    )
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE items (id BIGINT PRIMARY KEY)")

        def insert(key: int) -> None:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("INSERT INTO items VALUES (%s)", (key,))

        args = ["cdc", "capture", url, "--slot", slot, "--table", "items", "--journal", journal]
        args += ["--change-log", str(tmp_path / "log"), "--reconnect-timeout-ms", "600000"]
        assert _run(*args)[0] == 0  # creates the slot: the next change is captured
        with _following(args, insert) as capture:
            admin.execute(sql.SQL("ALTER ROLE {} NOLOGIN").format(role))
            admin.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE usename = %s",
                (name,),
            )
            _, err = capture.communicate(timeout=30)
        assert capture.returncode == 1, err
        last = err.splitlines()[-1]
        assert last.startswith("Error: StorageAccessError: PostgreSQL at ")
        assert "refuses the connection" in last
        assert err.count("retrying in") <= 1  # the session in flight was lost as in an outage
    finally:
        admin.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
        admin.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(role))
        admin.execute(sql.SQL("DROP ROLE {}").format(role))
        admin.close()


@pytest.mark.postgres
def test_ctrl_c_during_a_snapshot_ends_the_capture_with_one_line_and_status_130(
    request: pytest.FixtureRequest, tmp_path: Path, journal: str
) -> None:
    """Ctrl-C while `--snapshot` read a table ended with click's `Aborted!` and status 1."""
    source, _, _ = _capture_source(request, tmp_path, "postgres")
    args = ["cdc", "capture", *source, "--table", "items", "--journal", journal]
    args += ["--change-log", str(tmp_path / "log")]
    assert _run(*args)[0] == 0  # creates the slot
    with psycopg.connect(source[0]) as locker:
        locker.execute("LOCK TABLE items IN ACCESS EXCLUSIVE MODE")  # the snapshot's read waits
        capture = _started(*args, "--snapshot", "--follow")
        try:
            deadline = time.monotonic() + 30
            while not _waits_for_a_lock(source[0], "%ordo_snapshot%"):
                assert capture.poll() is None
                assert time.monotonic() < deadline
                time.sleep(0.05)
            _interrupt(capture)
        finally:
            capture.kill()
            capture.wait()


def _waits_for_a_lock(dsn: str, query: str) -> bool:
    """Whether a session of the database at `dsn` running a statement like `query` waits for a
    lock."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query LIKE %s AND pid <> pg_backend_pid()",
            (query,),
        ).fetchone()
    return row is not None and int(row[0]) > 0
