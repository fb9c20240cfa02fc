"""Commands that run Spark print their own output only; Spark's goes to its log file."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from cdc_support import USERS
from ordo.cdc import Audit, Cell, Mutation, SchemaRegistry
from ordo.cdc.change_rows import ChangeRows
from ordo.cli.main import cli
from ordo.spark.query_failure import failure_line
from ordo.storage.open import stores_at
from ordo.storage.parquet import ParquetChangeLog

pytestmark = pytest.mark.spark

ORDO = Path(sys.executable).parent / "ordo"


def _users_sink(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/sink.db"
    with stores_at(url) as stores:
        SchemaRegistry(stores.schemas).register(USERS)
    return url


def test_a_new_spark_writes_its_console_output_to_the_log_file(tmp_path: Path) -> None:
    sink = _users_sink(tmp_path)
    insert = Mutation(
        table="users",
        partition_key=(1,),
        cells={"name": Cell(value="Ada", write_time=10), "age": Cell(value=36, write_time=10)},
        liveness=Cell(value=True, write_time=10),
        audit=Audit(source="test", replica="r", segment="s", position=1),
    )
    ParquetChangeLog(tmp_path / "log").append("users", [(0, ChangeRows.from_mutations([insert]))])
    log = tmp_path / "spark.log"
    env = {**os.environ, "ORDO_SPARK_LOG": str(log)}
    command = [str(ORDO), "cdc", "materialize", "users", "--journal", sink]
    command += ["--change-log", str(tmp_path / "log"), "--checkpoint", str(tmp_path / "ck")]

    done = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=300, check=False
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout == "materializer 'users': 1 message stored; table users_materialized\n"
    started, *batches = done.stderr.splitlines()
    assert started == f"starting Spark (its own output goes to {log}) ..."
    batch = re.compile(r"materializer 'users': batch \d+, 1 row in [\d.]+ s")
    assert batches
    assert all(batch.fullmatch(line) for line in batches)
    assert "TransformWithStateInPandas Python worker" in log.read_text(encoding="utf-8")


def test_materializing_a_table_without_a_schema_is_a_one_line_error(
    spark: SparkSession, tmp_path: Path
) -> None:
    sink = _users_sink(tmp_path)
    found = CliRunner().invoke(
        cli,
        ["cdc", "materialize", "user", "--journal", sink, "--checkpoint", str(tmp_path / "ck")],
    )

    assert found.exit_code == 1
    assert found.stderr.startswith("Error: UnknownSchemaError: no schema is registered")
    assert found.stderr.count("\n") == 1
    assert spark.range(1).count() == 1  # the test session's Spark was reused, not stopped


@pytest.mark.parametrize(
    ("message", "line"),
    [
        (
            "[STREAM_FAILED] Query terminated with exception: [PYTHON_EXCEPTION] An exception "
            'was thrown from the Python worker: Traceback (most recent call last):\n  File "h.py"'
            ', line 7, in boom\n    raise ValueError("boom")\nValueError: boom\n SQLSTATE: 38000'
            "\n=== Streaming Query ===\nIdentifier: x",
            "ValueError: boom",
        ),
        (
            "[FOREACH_BATCH_USER_FUNCTION_ERROR] Traceback (most recent call last):\n  File"
            ' "p.py", line 1, in call\npyspark.errors.PythonException: An exception was thrown:'
            '\nTraceback (most recent call last):\n  File "s.py", line 9, in write\n'
            "ordo.errors.StorageError: no such table: t\n SQLSTATE: 39000\n"
            "=== Streaming Query ===\nTraceback (most recent call last):\nNotThis: x",
            "StorageError: no such table: t",
        ),
        (
            "[PYTHON_DATA_SOURCE_ERROR] Failed to plan: Traceback (most recent call last):\n"
            '  File "o.py", line 3, in parse\nordo.errors.StorageUnavailableError: no journal\n\n'
            "During handling of the above exception, another exception occurred:\n\n"
            'Traceback (most recent call last):\n  File "runner.py", line 9, in main\n'
            "UnboundLocalError: cannot access local variable 'reader'\n",
            "StorageUnavailableError: no journal",
        ),
        ("[STREAM_FAILED] Query [id = 1] terminated\n=== Streaming Query ===\n", None),
    ],
)
def test_a_failed_querys_line_is_the_python_exception_else_sparks_first_line(
    message: str, line: str | None
) -> None:
    assert failure_line(message) == (line or message.splitlines()[0])
