"""The SparkSession of one command-line job (demo, pipelines, CDC, rebuild, verify)."""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from py4j.protocol import Py4JError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from ordo.errors import ConfigurationError, NoSparkExecutorError, SparkMasterUnreachableError
from ordo.interrupts import SignalFlag, completing, run_interruptibly, stop_flag, terminable
from ordo.settings.variables import SPARK_LOG_VARIABLE
from ordo.spark.register import start_session

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
"""What a log file's name does not keep of a job's name (a processor's, which may hold any
text): a `/` made a folder of the name's first part, other characters trouble shells."""
LONGEST_LOG_NAME = 100
"""The most characters of a job's name a log file's name keeps; a name may be 255 characters
long, more than a file system takes with `.log` (and a prefix) added."""


def log_file_name(app_name: str) -> str:
    """The file name of the job's log: its name, made safe for a file name, and `.log`.

    A name that had to change (characters replaced, cut to LONGEST_LOG_NAME) gets a short hash
    of the whole name, so that two jobs whose names differ only there keep apart.
    """
    slug = _UNSAFE.sub("-", app_name).lstrip(".-")[:LONGEST_LOG_NAME]
    if slug != app_name:
        digest = hashlib.sha256(app_name.encode("utf-8")).hexdigest()[:10]
        slug = f"{slug.rstrip('-')}-{digest}" if slug.rstrip("-") else digest
    return f"{slug}.log"


def spark_output_path(app_name: str) -> Path:
    """Where the job `app_name` sends Spark's console output: ORDO_SPARK_LOG, else a temp file.

    One file per job name (`log_file_name`), replaced by its next run, so that two different
    jobs running at once (a pipeline and a materializer) keep apart.
    """
    chosen = os.environ.get(SPARK_LOG_VARIABLE)
    return Path(chosen) if chosen else Path(tempfile.gettempdir()) / log_file_name(app_name)


@contextmanager
def job_session(
    *,
    master: str,
    app_name: str,
    executor_timeout_ms: int,
    announce: Callable[[str], object] | None = None,
) -> Iterator[SparkSession]:
    """The active session if there is one (left running), else a new one stopped at the end.

    A command run inside a process that already has a session (a notebook, the test suite)
    must neither start a second one nor stop the caller's. A new session's JVM writes its
    console output to `spark_output_path(app_name)`, not to the terminal the command prints to;
    `announce` is told so before Spark starts (which takes seconds). A Spark that does not start
    (a bad master URL, an output file that cannot be written) is a one-line ConfigurationError,
    a cluster's master that cannot be reached a SparkMasterUnreachableError, one that starts no
    executor for the job within `executor_timeout_ms` a NoSparkExecutorError (`_wait_for_executor`).
    Ctrl-C while it starts is a KeyboardInterrupt once it has started and stopped again.

    SIGTERM raises Terminated from the start of the block to its end (`terminable`), as Ctrl-C
    raises KeyboardInterrupt, except in the flags of its steps that call into Py4J (the start,
    the wait for an executor, a command's `run_job`, the session's stop). A stop between two
    of those steps (right after Spark started) kept SIGTERM's default action: the process ended
    at once, without the command's line. From the start to the executor, a stop is a flag
    (`completing`) that the wait looks at, raised at the latest once the executor came; the
    session is then stopped.
    """
    with terminable():
        is_running = SparkSession.getActiveSession() is not None
        output = spark_output_path(app_name)
        if not is_running and announce is not None:
            announce(f"starting Spark (its own output goes to {output}) ...")
        spark: SparkSession | None = None
        try:
            with completing() as interrupted:
                spark = _started(master=master, app_name=app_name, output=output)
                if not is_running:
                    _wait_for_executor(
                        spark,
                        interrupted,
                        master=master,
                        timeout_ms=executor_timeout_ms,
                        output=output,
                    )
            yield spark
        finally:
            if spark is not None and not is_running:
                with stop_flag():  # a Ctrl-C in Py4J's call would log its tracebacks
                    spark.stop()


def _started(*, master: str, app_name: str, output: Path) -> SparkSession:
    """start_session off the main thread, so that PySpark installs no SIGINT handler of its own.

    Ctrl-C while Spark starts (seconds) lets the start end, stops the new session and raises
    KeyboardInterrupt (`run_interruptibly`); the commands run their Spark calls with `run_job`.
    A start that fails is a one-line error (see `job_session`).
    """
    started: list[SparkSession] = []

    def start() -> SparkSession:
        started.append(start_session(master=master, app_name=app_name, output=output))
        return started[-1]

    try:
        return run_interruptibly(start)
    except KeyboardInterrupt:
        for spark in started:
            with stop_flag():
                spark.stop()
        raise
    except OSError as exc:  # only the output file is opened on this side of the JVM
        msg = f"cannot write Spark's output to {output}: {exc}"
        if os.environ.get(SPARK_LOG_VARIABLE):  # the user's choice: say where it came from
            msg = f"{SPARK_LOG_VARIABLE}: {msg}"
        raise ConfigurationError(msg) from exc
    except (PySparkException, Py4JError) as exc:
        cause = _unreachable_master(master, output)
        if cause is not None:
            raise SparkMasterUnreachableError(
                master=master, cause=cause, output=str(output)
            ) from exc
        msg = f"Spark did not start with master {master!r}: {_start_failure(exc, output)}"
        raise ConfigurationError(msg) from exc


_JVM_EXCEPTION = re.compile(r"(?:[a-z]\w*\.)+(\w*(?:Exception|Error): .+)")
"""A Java exception line, its package dropped (`org.apache.spark.SparkException: ...`)."""


def _start_failure(exc: Exception, output: Path) -> str:
    """What stopped Spark from starting, in one line (its output file has the whole story).

    A JVM that exits at once (spark-submit refused the master) leaves PySpark saying only that
    it exited; the reason is the first Java exception in its output. A JVM that started and
    failed to create the context names the exception in Py4J's message.
    """
    text = str(exc)
    if isinstance(exc, PySparkException) and output.is_file():
        text = output.read_text(encoding="utf-8", errors="replace")
    found = _JVM_EXCEPTION.search(text)
    reason = found[1] if found else text.strip().splitlines()[0]
    return f"{reason} (Spark's output: {output})"


_CLUSTER_MASTERS = ("spark://", "k8s://")
"""The masters that are reached over the network: a standalone cluster's, Kubernetes' API."""
_NETWORK_FAILURE = re.compile(
    r"java\.net\.((?:UnknownHost|Connect|NoRouteToHost|SocketTimeout)Exception: .+)"
)
"""A Java exception of a connection that failed, its package dropped."""
_STANDALONE_GAVE_UP = "All masters are unresponsive! Giving up."
"""What a standalone cluster's client logs once its registration attempts have all failed."""


def _unreachable_master(master: str, output: Path) -> str | None:
    """Why Spark could not reach a cluster's `master`, from its output; None if it could.

    A standalone master that does not answer stops the context after Spark's registration
    attempts (3 of 20 s each, fixed in Spark's StandaloneAppClient: no setting shortens them),
    and PySpark then says only that the context was stopped. The network error in the output
    names the cause (an unknown host, a refused connection); a master that accepted the
    connection but never answered has none.
    """
    if not master.startswith(_CLUSTER_MASTERS) or not output.is_file():
        return None
    text = output.read_text(encoding="utf-8", errors="replace")
    failures = _NETWORK_FAILURE.findall(text)
    if failures:
        return str(failures[-1]).strip()
    return "no answer to Spark's attempts to register" if _STANDALONE_GAVE_UP in text else None


EXECUTOR_POLL_S = 0.2
"""How often the wait for a cluster's first executor asks the driver whether one has come."""
_DYNAMIC_ALLOCATION = "spark.dynamicAllocation.enabled"
"""The setting with which Spark asks for executors only once tasks wait for them."""


def _wait_for_executor(
    spark: SparkSession, interrupted: SignalFlag, *, master: str, timeout_ms: int, output: Path
) -> None:
    """Return once the cluster's `master` has started an executor for the job.

    A standalone master with no workers, or none with the free cores and memory the job asks
    for, accepts the job and leaves every Spark job of it waiting for ever, without a word even
    in Spark's output file (its warning is below the ERROR level of `start_session`'s sessions):
    after `timeout_ms` without an executor, NoSparkExecutorError. Not
    checked: a local master (the driver runs the tasks; local-cluster's workers start with it),
    and a job with dynamic allocation, which has no executor until its first tasks wait. Ctrl-C
    while waiting is a KeyboardInterrupt, SIGTERM Terminated (the caller stops the session):
    either only sets the caller's flag `interrupted`, so that it never breaks into a Py4J call,
    and the wait looks at it (a stop that came before, right after Spark started, included).
    """
    dynamic = spark.sparkContext.getConf().get(_DYNAMIC_ALLOCATION, "false") or "false"
    if master.startswith("local") or dynamic.strip().lower() == "true":  # Spark's parsing
        return
    deadline = time.monotonic() + timeout_ms / 1000
    while not _has_executor(spark):
        left = deadline - time.monotonic()
        if left <= 0:
            raise NoSparkExecutorError(master=master, timeout_ms=timeout_ms, output=str(output))
        if interrupted.wait(min(EXECUTOR_POLL_S, left)):
            raise interrupted.interrupt()


def _has_executor(spark: SparkSession) -> bool:
    """Whether an executor of the job has registered with the driver.

    Asks the JVM's SparkStatusTracker.getExecutorInfos (public API; PySpark's StatusTracker does
    not offer it): one entry per block manager registered with the driver, the driver's own
    included. An executor's block manager registers once the driver's scheduler has accepted
    the executor and it has started, ready for tasks. (SparkContext.getExecutorMemoryStatus reads
    the same registry; the scheduler's executor ids are only reached through a private method.)
    """
    tracker = spark.sparkContext._jsc.sc().statusTracker()
    return len(tracker.getExecutorInfos()) > 1
