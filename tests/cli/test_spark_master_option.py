"""--master of the commands that run Spark: a malformed URL, and a cluster nobody answers at.

Each command runs in a process of its own (`spark_command`): in this one, the first Spark
session is the tests' shared one, which a command would reuse whatever its --master.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import click
import pytest

from cli_support import pipeline_file, spark_command
from ordo.cli.spark_master import FORMS, SPARK_MASTER


@pytest.mark.parametrize(
    ("command", "path"),
    [
        (("demo",), "ordo demo"),
        (("pipeline", "run", "pipeline.toml"), "ordo pipeline run"),
        (("cdc", "materialize", "readings", "--checkpoint", "cp"), "ordo cdc materialize"),
        (("cdc", "simulate"), "ordo cdc simulate"),
        (("verify",), "ordo verify"),
        (("reconcile", "rebuild", "--all"), "ordo reconcile rebuild"),
    ],
)
def test_a_malformed_master_is_a_usage_error_before_anything_starts(
    tmp_path: Path, command: tuple[str, ...], path: str
) -> None:
    """It was Spark's error once its JVM had started, seconds later, after the command's own
    checks (a demo's journal, a pipeline's checkpoint lock)."""
    pipeline_file(tmp_path, "")
    before = sorted(tmp_path.iterdir())
    args = (*command, "--master", "nonsense")
    run = spark_command(*args, spark_log=tmp_path / "spark.log", cwd=tmp_path)
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr == (
        f"Error: Invalid value for '--master': 'nonsense' is not a Spark master URL ({FORMS}); "
        f"see '{path} --help'\n"
    )
    assert sorted(tmp_path.iterdir()) == before  # no journal, checkpoint or Spark output


@pytest.mark.parametrize(
    "master",
    [
        "local",
        "local[*]",
        "local[4]",
        "local[4, 2]",
        "local[*,3]",
        "local-cluster[2, 1, 1024]",
        "spark://master:7077",
        "spark://m1.example.com:7077,m2.example.com:7077",
        "spark://[::1]:7077",
        "yarn",
        "k8s://https://kubernetes.example.com:443",
        "k8s://127.0.0.1:6443",
    ],
)
def test_every_form_of_sparks_master_urls_is_taken(master: str) -> None:
    assert SPARK_MASTER.convert(master, None, None) == master


@pytest.mark.parametrize(
    "master",
    [
        "",
        "nonsense",
        "bogus://x",
        "Local[2]",
        "local[two]",
        "local[]",
        "spark://nohost",
        "spark://:7077",
        "spark://user@master:7077",
        "spark://master:7077/path",
        "yarn-client",
    ],
)
def test_a_master_spark_would_refuse_for_its_form_is_refused(master: str) -> None:
    """Spark refuses each (spark-submit, or SparkContext's parsing of the URL)."""
    with pytest.raises(click.BadParameter, match="is not a Spark master URL"):
        SPARK_MASTER.convert(master, None, None)


@pytest.mark.slow
def test_a_cluster_master_that_cannot_be_reached_is_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spark's words were "IllegalStateException: Cannot call methods on a stopped
    SparkContext", as a ConfigurationError like a misspelt URL's.

    A Kubernetes master: its client gives up at once when told to retry no request (the system
    property Spark reads for it; its default, three retries after growing back-offs for the
    start and for each of the four deletes of its clean-up, waits some 3 s for the same error).
    A standalone `spark://` master that does not answer ends the same way, with the same
    network error in Spark's output, but only after Spark's three registration attempts of 20 s
    each (fixed: no setting shortens them), a minute the suite does not spend.
    """
    config = pipeline_file(tmp_path, "")
    spark_log = tmp_path / "spark.log"
    options = f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} -Dkubernetes.request.retry.backoffLimit=0"
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", options.strip())
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound and not listening: a connection is refused
        master = f"k8s://https://127.0.0.1:{closed.getsockname()[1]}"
        run = spark_command("pipeline", "run", str(config), "--master", master, spark_log=spark_log)
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    *_, error = run.stderr.splitlines()
    assert error.startswith(
        "Error: SparkMasterUnreachableError: Spark could not reach its master "
        f"{master} (ConnectException: "
    )
    assert error.endswith(
        "Connection refused): check the host and port in --master, and that the master is "
        f"running and can be reached from this machine (Spark's output: {spark_log})"
    )
