"""examples/spark_pipelines: `spark-pipelines run` fills the streaming table `orders` from ordo."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ordo.spark.worker_python import worker_python
from ordo.time import format_first_time_bucket

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_pipelines"
SPARK_PIPELINES = Path(sys.executable).parent / "spark-pipelines"

pytestmark = pytest.mark.spark

EVENTS = 30
ORDERS = 3  # make_journal.py's persistence ids: order-0 .. order-2


def _project(tmp_path: Path) -> Path:
    """The example's definitions under a spec whose storage is in tmp_path.

    The spec's storage must be an absolute URI and the libraries glob is relative to the spec,
    so the test runs a copy rather than the example's spec itself.
    """
    project = tmp_path / "project"
    shutil.copytree(
        EXAMPLE / "transformations",
        project / "transformations",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    spec = (EXAMPLE / "spark-pipeline.yaml").read_text(encoding="utf-8")
    storage = [line for line in spec.splitlines() if line.startswith("storage:")]
    assert len(storage) == 1
    spec = spec.replace(storage[0], f"storage: {(tmp_path / 'storage').as_uri()}")
    (project / "spark-pipeline.yaml").write_text(spec, encoding="utf-8")
    return project


def _make_journal(path: Path, first_time_bucket: str) -> dict[str, str]:
    """Run make_journal.py; the environment variables it prints."""
    printed = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE / "make_journal.py"),
            str(path),
            "--events",
            str(EVENTS),
            "--first-time-bucket",
            first_time_bucket,
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    exports: dict[str, str] = {}
    for line in printed.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        exports[name] = value.strip("'")
    assert exports == {
        "ORDO_JOURNAL": f"sqlite:///{path.resolve()}",
        "ORDO_FIRST_TIME_BUCKET": first_time_bucket,
    }
    return exports


def _run_pipeline(spec: Path, cwd: Path, env: dict[str, str]) -> str:
    """`spark-pipelines run`, its whole process group killed if it outlives the timeout."""
    process = subprocess.Popen(
        [str(SPARK_PIPELINES), "run", "--spec", str(spec)],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(f"spark-pipelines run timed out:\n{output[-5000:]}")
    assert process.returncode == 0, output[-5000:]
    return output


def test_spark_pipelines_run_fills_the_streaming_table_with_the_tag(tmp_path: Path) -> None:
    first_time_bucket = format_first_time_bucket(time.time_ns() // 1_000_000 - 3_600_000)
    journal = _make_journal(tmp_path / "journal.db", first_time_bucket)
    env = {
        **os.environ,
        **journal,
        "PYSPARK_PYTHON": worker_python("local[*]"),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(EXAMPLE), os.environ.get("PYTHONPATH")])),
        "ORDO_EVENTUAL_CONSISTENCY_DELAY_MS": "0",
        "ORDO_SEGMENTS": "2",
    }

    output = _run_pipeline(_project(tmp_path) / "spark-pipeline.yaml", tmp_path, env)

    assert "Run is COMPLETED." in output
    assert (tmp_path / "storage" / "_checkpoints").is_dir()
    # The in-memory catalog is gone with the run; the table's files stay in the warehouse.
    rows = pq.read_table(tmp_path / "spark-warehouse" / "orders").to_pylist()
    assert len(rows) == EVENTS
    per_order: dict[str, list[int]] = {}
    for row in rows:
        per_order.setdefault(row["persistence_id"], []).append(row["tag_pid_sequence_nr"])
        assert json.loads(row["tags"])["order"] == row["tag_pid_sequence_nr"]
        assert json.loads(row["payload"])["i"] % ORDERS == int(row["persistence_id"][-1])
    assert {pid: sorted(numbers) for pid, numbers in per_order.items()} == {
        f"order-{p}": list(range(1, EVENTS // ORDERS + 1)) for p in range(ORDERS)
    }
