"""`ordo cdc schemas register` refusing bad documents, `ordo cdc schemas list` naming a damaged
stored version, and `ordo cdc materialize` refusing what it cannot find or a Spark that does
not start, in one line each.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from psycopg.conninfo import make_conninfo

from cdc_cli_support import one_line_error, registered, run_ordo
from cli_support import spark_command
from operations_support import execute
from ordo.cdc import SchemaRegistry
from ordo.errors import StorageIntegrityError
from ordo.simulation.cdc import SIMULATED_SCHEMA
from ordo.storage.open import init_storage, stores_at
from ordo.storage.postgres.connection import redacted_dsn
from permission_support import locked_out

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
    registered(tmp_path, journal)
    schema_file = tmp_path / "v2.json"
    schema_file.write_text(json.dumps(document))
    code, _, err = run_ordo("cdc", "schemas", "register", str(schema_file), "--journal", journal)
    one_line_error(code, err, problem)
    code, out, _ = run_ordo("cdc", "schemas", "list", "--journal", journal, "--json")
    assert [v["version"] for v in json.loads(out)] == [1]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[" * 100_000 + "]" * 100_000, "not a JSON document: nested deeper than the "),
        (
            '{"table": 1' + "0" * 5_000 + "}",
            "not a JSON document: integer too long (5,001 digits, at most 4,300)",
        ),
        (  # the json module kept the last: a schema unlike the file's text was registered
            '{"table": "t", "table": "u", "columns": []}',
            "not a JSON document: duplicate key 'table'",
        ),
    ],
)
def test_schemas_register_refuses_json_python_cannot_read_in_one_line(
    tmp_path: Path, journal: str, text: str, problem: str
) -> None:
    """A RecursionError, or the ValueError of a long integer, was the command's traceback;
    Python's advice for the long integer (`sys.set_int_max_str_digits()`) followed."""
    assert run_ordo("init", "--journal", journal)[0] == 0
    schema_file = tmp_path / "schema.json"
    schema_file.write_text(text)
    code, _, err = run_ordo("cdc", "schemas", "register", str(schema_file), "--journal", journal)
    one_line_error(code, err, f"InvalidSchemaError: {problem}")


def test_schemas_register_names_a_file_that_is_not_text(tmp_path: Path, journal: str) -> None:
    assert run_ordo("init", "--journal", journal)[0] == 0
    schema_file = tmp_path / "schema.json"
    schema_file.write_bytes(b"\xff\xfe\x00{}")
    code, _, err = run_ordo("cdc", "schemas", "register", str(schema_file), "--journal", journal)
    one_line_error(code, err, f"InvalidSchemaError: {schema_file}: not a text file: ")


def test_schemas_register_skips_a_byte_order_mark(tmp_path: Path, journal: str) -> None:
    """Editors on Windows write one: it was "not a JSON document: Expecting value"."""
    assert run_ordo("init", "--journal", journal)[0] == 0
    schema_file = tmp_path / "schema.json"
    schema_file.write_text(f"\ufeff{SIMULATED_SCHEMA.to_json()}", encoding="utf-8")
    code, out, err = run_ordo("cdc", "schemas", "register", str(schema_file), "--journal", journal)
    assert (code, out.split(" ")[:2]) == (0, ["readings", "v1"]), err


@pytest.mark.parametrize(
    ("stored", "problem"),
    [
        ("{oops", "not a JSON document: Expecting property name enclosed in double quotes"),
        ("[]", "the schema document must be a JSON object, got []"),
    ],
)
def test_a_damaged_stored_schema_is_named_as_damaged_storage(
    tmp_path: Path, journal_url: str, stored: str, problem: str
) -> None:
    """A `cdc_schemas` row changed by hand: it was InvalidSchemaError, as if the user had given
    a bad document, and named neither the table nor the version."""
    registered(tmp_path, journal_url)
    execute(journal_url, "UPDATE cdc_schemas SET schema_json = ?", (stored,))
    code, _, err = run_ordo("cdc", "schemas", "list", "--journal", journal_url)
    one_line_error(
        code,
        err,
        "StorageIntegrityError: the stored schema_json of schema id 1 (version 1 of table "
        f"'readings') is no schema document: {problem}",
    )
    with stores_at(journal_url) as stores, pytest.raises(StorageIntegrityError) as caught:
        SchemaRegistry(stores.schemas).by_id(1)
    assert isinstance(caught.value.__cause__, ValueError)


def test_a_stored_schema_that_is_a_blob_is_named_as_damaged_storage(
    tmp_path: Path, journal: str
) -> None:
    """SQLite keeps the BLOB a hand edit stores (`readfile()` of the sqlite3 shell returns one)
    in the TEXT column: it was the decoder's TypeError, a traceback of `ordo cdc schemas list`."""
    registered(tmp_path, journal)
    execute(
        journal, "UPDATE cdc_schemas SET schema_json = ?", (SIMULATED_SCHEMA.to_json().encode(),)
    )
    code, _, err = run_ordo("cdc", "schemas", "list", "--journal", journal)
    one_line_error(
        code,
        err,
        "StorageIntegrityError: the stored schema_json of schema id 1 (version 1 of table "
        "'readings') is no schema document: a BLOB, not text",
    )
    with stores_at(journal) as stores, pytest.raises(StorageIntegrityError):
        SchemaRegistry(stores.schemas).by_id(1)


def _registration_time_is_damaged(journal: str, problem: str) -> None:
    """`ordo cdc schemas list` and the registry name the damaged `registered_at` of version 1."""
    code, _, err = run_ordo("cdc", "schemas", "list", "--journal", journal)
    one_line_error(
        code,
        err,
        "StorageIntegrityError: the stored registered_at of schema id 1 (version 1 of table "
        f"'readings') is no time: {problem}",
    )
    with stores_at(journal) as stores, pytest.raises(StorageIntegrityError):
        SchemaRegistry(stores.schemas).by_id(1)


def test_a_registration_time_that_is_text_is_named_as_damaged_storage(
    tmp_path: Path, journal: str
) -> None:
    """SQLite keeps text a hand edit stores in the INTEGER column: it was a TypeError, a
    traceback of `ordo cdc schemas list`."""
    registered(tmp_path, journal)
    execute(journal, "UPDATE cdc_schemas SET registered_at = 'x'")
    _registration_time_is_damaged(journal, "'x' is not a number of milliseconds")


def test_a_registration_time_past_the_years_of_a_time_is_named_as_damaged_storage(
    tmp_path: Path, journal_url: str
) -> None:
    """A number of milliseconds that is no datetime was its ValueError, on either backend."""
    registered(tmp_path, journal_url)
    execute(journal_url, f"UPDATE cdc_schemas SET registered_at = {2**63 - 1}")
    _registration_time_is_damaged(journal_url, f"{2**63 - 1} ms is out of range: year ")


@pytest.mark.postgres
def test_materialize_names_a_postgres_sink_without_its_password(
    tmp_path: Path, postgres_dsn: str
) -> None:
    """The sink's URL was shown as given, password included, when it held no table's schema."""
    init_storage(postgres_dsn)
    sink = make_conninfo(postgres_dsn, password="s3cret")  # noqa: S106 - the test server trusts any
    code, _, err = run_ordo(
        *("cdc", "materialize", "nosuch", "--journal", sink, "--change-log", str(tmp_path)),
        *("--checkpoint", str(tmp_path / "checkpoint")),
    )
    one_line_error(
        code,
        err,
        "UnknownSchemaError: no schema is registered for table 'nosuch' in PostgreSQL at "
        f"{redacted_dsn(sink)}: capture the table",
    )
    assert "s3cret" not in err


def test_materialize_refuses_a_table_or_change_log_it_cannot_find_before_spark_starts(
    tmp_path: Path, journal: str
) -> None:
    registered(tmp_path, journal)
    log, misspelt = tmp_path / "log", tmp_path / "lgo"
    log.mkdir()
    checkpoint = tmp_path / "checkpoint"
    materialize = ("cdc", "materialize", "--journal", journal, "--checkpoint", str(checkpoint))
    code, _, err = run_ordo(*materialize, "--change-log", str(log), "nosuch")
    one_line_error(code, err, "UnknownSchemaError: no schema is registered for table 'nosuch'")
    assert err.rstrip().endswith(  # ingestion needs a schema too: it cannot come first
        ": capture the table (`ordo cdc capture` registers its schema), or declare its schema "
        "(`ordo cdc schemas register`) and ingest its changes (`ordo cdc ingest`); or check "
        "the table's name"
    )
    code, _, err = run_ordo(*materialize, "--change-log", str(misspelt), "readings")
    one_line_error(
        code, err, f"ConfigurationError: no change log of table 'readings' in {misspelt}"
    )
    code, _, err = run_ordo(*materialize, "--change-log", str(misspelt), "readings", "--follow")
    one_line_error(code, err, f"ConfigurationError: no change log directory {misspelt}")
    assert not misspelt.exists()
    assert not checkpoint.exists()


@pytest.mark.parametrize("target", ["tokens", "TAG_VIEWS"])
def test_materialize_refuses_one_of_ordos_own_tables_as_its_target(
    tmp_path: Path, journal: str, target: str
) -> None:
    """The sink adopts a target table that exists, adding the schema's columns to it and
    upserting rows into it: given `tokens`, it altered the token store of the journal."""
    registered(tmp_path, journal)
    (tmp_path / "log").mkdir()
    checkpoint = tmp_path / "checkpoint"
    code, _, err = run_ordo(
        "cdc", "materialize", "readings", "--journal", journal, "--change-log",
        str(tmp_path / "log"), "--checkpoint", str(checkpoint), "--target-table", target,
    )  # fmt: skip
    one_line_error(
        code, err, f"ConfigurationError: target table {target!r} is one of ordo's own tables"
    )
    assert not checkpoint.exists()


@pytest.mark.parametrize(
    ("args", "given"),
    [
        (["materialize", ""], "TABLE"),  # was "MaterializerSpec.name must not be empty"
        (["materialize", "readings", "--name", ""], "--name"),  # was the table's name
        (["schemas", "list", ""], "TABLE"),  # was "no schemas registered for table ''", exit 0
        (["schemas", "accept", "", "1"], "TABLE"),
    ],
)
def test_an_empty_table_or_name_is_refused_naming_the_argument(
    tmp_path: Path, journal: str, args: list[str], given: str
) -> None:
    registered(tmp_path, journal)
    checkpoint = ("--checkpoint", str(tmp_path / "checkpoint"))
    code, out, err = run_ordo(
        "cdc", *args, "--journal", journal, *(checkpoint if args[0] == "materialize" else ())
    )
    assert (code, out, err) == (
        1,
        "",
        f"Error: InvalidIdentifierError: {given} must not be empty\n",
    )
    assert not (tmp_path / "checkpoint").exists()


@pytest.mark.parametrize(
    ("master", "spark_log", "problem"),
    [
        ("local[0]", "spark.log", "Spark did not start with master 'local[0]': SparkException: "),
        ("local[1]", "file/spark.log", "ORDO_SPARK_LOG: cannot write Spark's output to "),
    ],
)
def test_materialize_says_in_one_line_why_spark_did_not_start(
    tmp_path: Path, journal: str, master: str, spark_log: str, problem: str
) -> None:
    registered(tmp_path, journal)
    (tmp_path / "log" / "readings").mkdir(parents=True)
    (tmp_path / "file").write_text("a file where ORDO_SPARK_LOG wants a directory")
    logs = ("--change-log", str(tmp_path / "log"), "--checkpoint", str(tmp_path / "checkpoint"))
    args = ("cdc", "materialize", "readings", "--master", master, "--journal", journal, *logs)
    materialize = spark_command(*args, spark_log=tmp_path / spark_log)
    assert materialize.returncode == 1
    assert "Traceback" not in materialize.stderr
    assert materialize.stderr.splitlines()[-1].startswith(f"Error: ConfigurationError: {problem}")


def test_materialize_names_a_checkpoint_whose_commits_cannot_be_listed_before_spark_starts(
    tmp_path: Path, journal: str
) -> None:
    """The check of the checkpoint against the sink's progress ended with the bare
    PermissionError. `locked_out` (tests/permission_support.py): a folder's mode stops root."""
    registered(tmp_path, journal)
    (tmp_path / "log" / "readings").mkdir(parents=True)
    checkpoint = tmp_path / "checkpoint"
    (checkpoint / "commits").mkdir(parents=True)
    (checkpoint / "metadata").write_text('{"id":"5b3c7c0e-0000-4000-8000-000000000000"}\n')
    materialize = (
        *("cdc", "materialize", "readings", "--journal", journal),
        *("--change-log", str(tmp_path / "log"), "--checkpoint", str(checkpoint)),
    )
    code, _, err = locked_out(checkpoint / "commits", lambda: run_ordo(*materialize))
    one_line_error(
        code,
        err,
        f"ConfigurationError: cannot list the commits of checkpoint {checkpoint}: "
        f"Permission denied: {checkpoint / 'commits'}",
    )


def test_materialize_counts_only_the_ascii_digit_names_of_a_checkpoints_commits(
    tmp_path: Path, journal: str
) -> None:
    """A file named `²` (str.isdigit() says it is a digit; int() refuses it) ended the check of
    the checkpoint before Spark starts with a ValueError traceback. Spark names commits by
    ASCII digits; commit 0 is what the check refuses here: the sink has no progress of it."""
    registered(tmp_path, journal)
    (tmp_path / "log" / "readings").mkdir(parents=True)
    checkpoint = tmp_path / "checkpoint"
    (checkpoint / "commits").mkdir(parents=True)
    (checkpoint / "metadata").write_text('{"id":"5b3c7c0e-0000-4000-8000-000000000000"}\n')
    for name in ("0", "\N{SUPERSCRIPT TWO}"):
        (checkpoint / "commits" / name).write_text("v1\n{}\n")
    code, _, err = run_ordo(
        *("cdc", "materialize", "readings", "--journal", journal),
        *("--change-log", str(tmp_path / "log"), "--checkpoint", str(checkpoint)),
    )
    one_line_error(
        code,
        err,
        "MaterializerCheckpointError: materializer 'readings' has no progress in the sink, but "
        "its checkpoint (query 5b3c7c0e-0000-4000-8000-000000000000) is at batch 1: ",
    )
