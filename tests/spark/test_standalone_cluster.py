"""A standalone Spark cluster (the pyspark wheel's master and worker) that gives a job no executor.

Such a master accepts the job and leaves every Spark job of it waiting for ever: the command hung
without a word, even in Spark's output file (its sessions log errors only). The commands run in
processes of their own: this one's first Spark session is the tests' shared local one, which a
command would reuse whatever its --master.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from cli_support import pipeline_file, spark_command
from ordo import NewEvent, open_journal
from processing_support import wait_for

SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"
"""The wheel's launcher of Spark's JVM programs (the master's and the worker's)."""
START_WAIT_S = 120.0
"""How long a master or worker may take to start before the fixture gives up (it takes seconds)."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _started(args: list[str], log: Path, ready: str) -> subprocess.Popen[bytes]:
    """`spark-class *args` in a process group of its own, once its `log` says `ready`."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(SPARK_CLASS), *args], stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    deadline = time.monotonic() + START_WAIT_S
    while ready not in log.read_text(encoding="utf-8", errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            _stop(process)
            pytest.fail(f"spark-class {args[0]} did not start: {log.read_text(errors='replace')}")
        time.sleep(0.1)
    return process


def _stop(process: subprocess.Popen[bytes]) -> None:
    """End the JVM and whatever it started (a worker's executors): its whole process group."""
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=60)


@contextlib.contextmanager
def _master(folder: Path) -> Iterator[tuple[str, Path]]:
    """A standalone master with no worker, its files in `folder`: its URL and its log.

    Its REST submission server is off (it takes a fixed port, 6066) and its web UI on any free
    port, so that runs at the same time keep apart.
    """
    properties = folder / "master.properties"
    properties.write_text("spark.master.rest.enabled false\n", encoding="utf-8")
    port = _free_port()
    log = folder / "master.log"
    args = ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port)]
    args += ["--webui-port", "0", "--properties-file", str(properties)]
    process = _started(args, log, "I have been elected leader")
    try:
        yield f"spark://127.0.0.1:{port}", log
    finally:
        _stop(process)


@pytest.fixture(scope="module")
def idle_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """One master with no worker for the module's tests that need no executor (`_master`): a
    master's start costs a JVM's."""
    with _master(tmp_path_factory.mktemp("master")) as started:
        yield started


class _MasterLog:
    """What a master's log holds of one application: the log past where it was at the start."""

    def __init__(self, path: Path) -> None:
        self.path, self.start = path, path.stat().st_size

    def text(self) -> str:
        """The log from the start on."""
        with self.path.open("rb") as log:
            log.seek(self.start)
            return log.read().decode("utf-8", errors="replace")

    def app_id(self) -> str:
        """The id of the one application the master registered since the start."""
        found = re.findall(r"Registered app \S+ with ID (\S+)", self.text())
        assert len(found) == 1, self.text()
        return str(found[0])


@pytest.fixture
def master(idle_master: tuple[str, Path]) -> tuple[str, _MasterLog]:
    """The module's idle master: its URL, and its log from the test's start on."""
    url, log = idle_master
    return url, _MasterLog(log)


@pytest.fixture
def worker_master(tmp_path: Path) -> Iterator[str]:
    """A master of the test's own with a worker of one core registered, its executors' files
    under tmp_path: the master's URL."""
    with _master(tmp_path) as (url, _):
        args = ["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1"]
        args += ["--cores", "1", "--memory", "1g", "--webui-port", "0"]
        args += ["--work-dir", str(tmp_path / "work")]
        process = _started(args, tmp_path / "worker.log", "Successfully registered with master")
        try:
            yield url
        finally:
            _stop(process)


@pytest.mark.slow
def test_a_cluster_that_starts_no_executor_ends_the_command_with_one_line(
    tmp_path: Path, master: tuple[str, _MasterLog]
) -> None:
    """A pipeline with an event to project waited for ever; now it ends after
    --executor-timeout-ms, naming the master, what to check and Spark's output, and its
    application is gone from the master."""
    url, master_log = master
    config = pipeline_file(tmp_path, "")
    with open_journal(f"sqlite:///{tmp_path / 'shop.db'}") as journal:
        journal.append("order-1", [NewEvent.of(1, tags=["order"])])
    spark_log = tmp_path / "spark.log"
    args = ("pipeline", "run", str(config), "--master", url, "--executor-timeout-ms", "1000")
    run = spark_command(*args, spark_log=spark_log)
    assert (run.returncode, run.stdout) == (1, "")
    assert "Traceback" not in run.stderr
    *_, error = run.stderr.splitlines()
    assert error == (
        f"Error: NoSparkExecutorError: Spark's master {url} started no executor for the job "
        "within 1 s: check that the cluster has workers registered (a standalone master's web "
        "UI lists them) with the free cores and memory the job asks for (spark.executor.cores, "
        f"spark.executor.memory), or allow longer with --executor-timeout-ms (Spark's output: "
        f"{spark_log})"
    )
    assert "Registering app ordo-totals" in master_log.text()
    _wait_for_the_app_removed(master_log)


def _wait_for_the_app_removed(master_log: _MasterLog) -> None:
    """Wait until the master has removed the stopped command's application: it hears of the
    stop on its own time."""
    removing = f"Removing app {master_log.app_id()}"
    wait_for(
        lambda: removing in master_log.text(),
        timeout=START_WAIT_S,
        what="the master to remove the stopped command's application",
    )


WAITING_COMMAND = Path(__file__).with_name("executor_waiting_command.py")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("number", "status"),
    [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
    ids=["ctrl-c", "sigterm"],
)
def test_a_stop_while_the_command_waits_for_an_executor_ends_it_with_its_line(
    tmp_path: Path, master: tuple[str, _MasterLog], number: signal.Signals, status: int
) -> None:
    """Ctrl-C (to the process group, as a terminal sends it) or SIGTERM (to the command alone,
    as a service manager sends it) while the command waits for the cluster's executor, long
    before --executor-timeout-ms, ends it at once with its line and status (SIGTERM's default
    action, were the wait's stop flag for Ctrl-C only, ended it without a word), its
    application unregistered from the master: stopped, not lost with its driver."""
    url, master_log = master
    config = pipeline_file(tmp_path, "")
    marker, spark_log = tmp_path / "waiting", tmp_path / "spark.log"
    args = ("pipeline", "run", str(config), "--master", url, "--executor-timeout-ms", "600000")
    with subprocess.Popen(
        [sys.executable, str(WAITING_COMMAND), str(marker), *args],
        env={**os.environ, "ORDO_SPARK_LOG": str(spark_log)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as job:
        try:
            wait_for(
                marker.exists, timeout=START_WAIT_S, what="the wait for an executor", process=job
            )
            if number is signal.SIGINT:
                os.killpg(job.pid, number)
            else:
                job.send_signal(number)
            out, err = job.communicate(timeout=START_WAIT_S)
        finally:
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGKILL)
    assert (job.returncode, out) == (status, "")
    assert err.splitlines() == [
        f"starting Spark (its own output goes to {spark_log}) ...",
        "pipeline 'totals' interrupted: stopped, it resumes from its checkpoint",
    ]
    _wait_for_the_app_removed(master_log)
    unregister = f"Received unregister request from application {master_log.app_id()}"
    assert unregister in master_log.text()


@pytest.mark.slow
def test_a_cluster_that_starts_an_executor_runs_the_job(tmp_path: Path, worker_master: str) -> None:
    """The executor is seen once it has registered: the default wait lets the job run on it."""
    url = worker_master
    script = (
        "import sys\n"
        "from ordo.spark.job_session import job_session\n"
        "url = sys.argv[1]\n"
        "with job_session(master=url, app_name='ordo-x', executor_timeout_ms=60_000) as spark:\n"
        "    print(spark.range(5).count())\n"
        "    print(spark.sparkContext._jsc.hadoopConfiguration().get('fs.file.impl'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, url],
        env={**os.environ, "ORDO_SPARK_LOG": str(tmp_path / "spark.log")},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # a cluster's executors have no jar of ordo's local file systems: Hadoop's own stays
    assert (done.returncode, done.stdout) == (0, "5\nNone\n"), done.stderr
