"""`ordo cdc simulate --sink`: the replica simulation materialized into an operator's database.

The runs write under names of their own and leave them in the sink (docs/cdc.md, "The replica
simulation"); the sink's other rows, a second run's and an operator's, stay as they were.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from pyspark.sql import SparkSession

from cdc_cli_support import run_ordo
from cli_support import spark_command
from operations_support import execute, execute_all
from ordo.cdc import ChangeMessage, JsonValue, Key, SchemaRegistry, TableSchema
from ordo.errors import ConfigurationError
from ordo.simulation.cdc import SIMULATED_SCHEMA
from ordo.spark.cdc_simulation import RUN_PREFIX, SimulationRun
from ordo.storage.open import init_storage, stores_at
from ordo.storage.sql_change_sink import MaterializerProgress

SIMULATE = ("cdc", "simulate", "--replicas", "3", "--keys", "40", "--mutations", "300", "--json")
CLEAN = {"broken_chains": 0, "table_not_fold": 0, "table_not_lww": 0, "nonconforming": 0}


def _simulated(sink: str) -> dict[str, object]:
    """One clean run of the command into `sink`: its JSON document."""
    code, out, err = run_ordo(*SIMULATE, "--sink", sink)
    assert (code, err) == (0, "")
    document: dict[str, object] = json.loads(out)
    assert document["violations"] == CLEAN
    assert document["clean"] is True
    return document


@dataclass(frozen=True)
class LeftBehind:
    """What a run left in the sink: schema versions, messages, progress, materialized rows."""

    versions: list[tuple[int, TableSchema]]
    messages: list[ChangeMessage]
    progress: list[MaterializerProgress]
    table: dict[Key, dict[str, JsonValue]]


def _left_behind(sink: str, run: str) -> LeftBehind:
    """What the run named `run` left in `sink`."""
    with stores_at(sink, mode="write") as stores:
        return LeftBehind(
            versions=[(v.version, v.schema) for v in stores.schemas.versions(run)],
            messages=list(stores.change_sink.read_messages(run)),
            progress=[p for p in stores.change_sink.progress() if p.materializer == run],
            table=stores.change_sink.read_table(f"{run}_materialized", SimulationRun(run).schema),
        )


@pytest.mark.spark
@pytest.mark.postgres
def test_runs_into_a_postgres_sink_leave_their_own_rows_and_touch_nothing_else(
    spark: SparkSession, postgres_dsn: str
) -> None:
    init_storage(postgres_dsn)
    with stores_at(postgres_dsn) as stores:  # an operator's own `readings` table and schema
        SchemaRegistry(stores.schemas).register(SIMULATED_SCHEMA)
    execute(postgres_dsn, "CREATE TABLE readings_materialized (sensor BIGINT, note TEXT)")
    execute(postgres_dsn, "INSERT INTO readings_materialized VALUES (1, 'mine')")

    first = _simulated(postgres_dsn)
    run = str(first["run"])
    assert run.startswith(RUN_PREFIX)
    left = _left_behind(postgres_dsn, run)
    assert left.versions == [(1, SimulationRun(run).schema)]
    assert len(left.messages) == first["messages"]
    assert [p.messages for p in left.progress] == [first["messages"]]
    assert len(left.table) == first["rows"]

    second = _simulated(postgres_dsn)
    assert second["run"] != run
    assert second["messages"] == first["messages"]  # the same seed, names of its own
    assert _left_behind(postgres_dsn, run) == left
    with stores_at(postgres_dsn) as stores:
        assert [v.schema for v in stores.schemas.versions("readings")] == [SIMULATED_SCHEMA]
        with pytest.raises(ConfigurationError) as refused:  # a name that is taken
            SimulationRun(run).require_unused(stores)
    assert str(refused.value) == (
        f"the sink already holds schema {run}, materializer {run}, table {run}_materialized: "
        "a simulation run writes under names of its own only; run it again (a new run takes "
        "a new name)"
    )
    assert execute(postgres_dsn, "SELECT * FROM readings_materialized") == [(1, "mine")]


@pytest.mark.parametrize(
    ("sink", "problem"),
    [
        ("mysql://host/db", "UnknownUrlSchemeError: unknown sink database URL scheme 'mysql'"),
        ("postgresql://127.0.0.1:1/db", "StorageUnavailableError: cannot connect to PostgreSQL"),
        ("sqlite:///{tmp}/nosuch.db", "StorageUnavailableError: no sink database at {tmp}"),
    ],
)
def test_a_sink_that_is_no_ordo_database_is_refused_before_spark_starts(
    tmp_path: Path, sink: str, problem: str
) -> None:
    """It must exist (a misspelt path is not made a new database) and be reachable."""
    spark_log = tmp_path / "spark.log"
    run = spark_command(*SIMULATE, "--sink", sink.format(tmp=tmp_path), spark_log=spark_log)
    assert (run.returncode, run.stdout) == (1, "")
    assert run.stderr.startswith(f"Error: {problem.format(tmp=tmp_path)}")
    assert run.stderr.count("\n") == 1  # no "starting Spark" line
    assert list(tmp_path.iterdir()) == []


def test_a_run_whose_spark_does_not_start_names_no_run_it_left_in_the_sink(tmp_path: Path) -> None:
    """The failure's line ended with "the sink keeps what run ... wrote" (its note) though the
    run left nothing there, Spark (local[0]: no threads) refusing to start: an operator was sent
    to look for, and remove, rows that no run wrote."""
    sink = f"sqlite:///{tmp_path}/sink.db"
    init_storage(sink)
    args = (*SIMULATE, "--sink", sink, "--master", "local[0]")
    run = spark_command(*args, spark_log=tmp_path / "spark.log")

    assert (run.returncode, run.stdout) == (1, "")
    (line,) = run.stderr.splitlines()[1:]  # after the "starting Spark" line
    assert line.startswith(
        "Error: ConfigurationError: Spark did not start with master 'local[0]': SparkException: "
    )
    assert line.endswith(f"(Spark's output: {tmp_path / 'spark.log'})")
    with stores_at(sink, mode="read") as stores:
        assert list(stores.schemas.tables()) == []


@pytest.mark.spark
@pytest.mark.postgres
def test_a_run_that_the_sink_refuses_names_the_run_it_left_there(
    spark: SparkSession, postgres_dsn: str
) -> None:
    """A run registers its schema before it materializes: a sink whose role may write ordo's
    tables but create none refused the run's table, and the failure's line did not say which
    run's schema it left (a stop's line does), so an operator could not tell it to remove."""
    init_storage(postgres_dsn)
    with _role_that_creates_nothing(postgres_dsn) as sink:
        code, out, err = run_ordo(*SIMULATE, "--sink", sink)
    with stores_at(postgres_dsn, mode="read") as stores:
        (run,) = [name for name in stores.schemas.tables() if name.startswith(RUN_PREFIX)]
    assert (code, out) == (1, "")
    assert err.startswith(
        "Error: QueryFailedError: cdc simulate failed: StorageAccessError: PostgreSQL refuses "
        "access: permission denied for schema "
    )
    assert err.endswith(
        f"; the sink keeps what run {run} wrote (docs/cdc.md says how to remove it)\n"
    )
    assert err.count("\n") == 1


@contextmanager
def _role_that_creates_nothing(dsn: str) -> Iterator[str]:
    """The URL of `dsn`'s database and schema as a role of its own, which may read and write
    the tables there but not create one; the role is dropped after the block."""
    role = f"r_{secrets.token_hex(6)}"
    ((schema,),) = execute(dsn, "SELECT current_schema()")
    execute_all(
        dsn,
        [
            (statement.format(role=role, schema=schema), ())
            for statement in (
                "CREATE ROLE {role} LOGIN",
                "GRANT USAGE ON SCHEMA {schema} TO {role}",
                "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}",
                "GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}",
            )
        ],
    )
    parts = urlsplit(dsn)
    try:
        yield urlunsplit(parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port}"))
    finally:
        execute_all(dsn, [(f"DROP OWNED BY {role}", ()), (f"DROP ROLE {role}", ())])
