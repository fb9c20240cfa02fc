"""Registering ordo's Spark data sources with a session."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from py4j.java_gateway import JavaGateway
from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

from ordo import arguments
from ordo.errors import ConfigurationError
from ordo.spark.class_archive import SUBMIT_OPTIONS_VARIABLE, driver_options
from ordo.spark.events_by_tag_source import EventsByTagDataSource
from ordo.spark.local_files import DIST_CLASSPATH_VARIABLE, file_system_settings, local_files_jar
from ordo.spark.query_arguments import require_session
from ordo.spark.worker_python import worker_python


def register(spark: SparkSession) -> None:
    """Make `ordo_events_by_tag` known to `spark` (readStream and read).

    Anything but a SparkSession is a ConfigurationError (an AttributeError before).
    """
    require_session(spark).dataSource.register(EventsByTagDataSource)


def python_for_workers(master: str | None = None) -> None:
    """Let Spark's Python workers run this interpreter (the one with ordo and pyarrow).

    Call before creating the SparkSession; an explicit PYSPARK_PYTHON wins. Given the session's
    `master`, a local one's workers import pyspark compiled, not from Spark's zip
    (`ordo.spark.worker_python`): half a second less at each start of a source's process.
    """
    if "PYSPARK_PYTHON" not in os.environ:
        chosen = sys.executable if master is None else worker_python(master)
        os.environ["PYSPARK_PYTHON"] = chosen


ROCKSDB_STATE_STORE = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
"""The state store the CDC materializer needs (transformWithState); fixed per checkpoint."""


LISTING_ON_DRIVER = 100_000
"""How many files a query's file source may name before Spark lists them with a job."""

_SHUFFLE_PARTITIONS_KEY = "spark.sql.shuffle.partitions"
CLUSTER_SHUFFLE_PARTITIONS = 4
"""The shuffle partitions of a session on a cluster's master, unless the user set them."""
_LOCAL_MASTER = re.compile(r"local(?:\[(\d+|\*)(?:\s*,\s*\d+)?\])?")
"""A local master URL as Spark reads it, its thread count (or `*`) as group 1."""


_SETTINGS = [
    ("spark.ui.enabled", "false"),
    ("spark.ui.showConsoleProgress", "false"),
    ("spark.sql.streaming.stateStore.providerClass", ROCKSDB_STATE_STORE),
    ("spark.sql.sources.parallelPartitionDiscovery.threshold", str(LISTING_ON_DRIVER)),
]
"""The settings of start_session's sessions."""


def start_session(
    *,
    master: str = "local[*]",
    app_name: str = "ordo",
    output: str | os.PathLike[str] | None = None,
) -> SparkSession:
    """A SparkSession for ordo's jobs: sources registered, UI and console progress bar off.

    Stateful queries keep their state in RocksDB, which the CDC materializer requires; the
    provider cannot change once a query has a checkpoint, so it is set before the first run.
    Files named in a micro-batch are listed on the driver up to `LISTING_ON_DRIVER` of them:
    Spark's default lists more than 32 paths with a Spark job of one task per path, which costs
    the materializer far more than the listing itself (bench/cdc.py measures both). A session
    this call starts gets a shuffle partition per core of a local master (`_start_context`),
    and on a local master writes its local files without a process per file
    (`ordo.spark.local_files`).

    With `output`, the JVM writes its console output to that file when this call is the one
    that starts it: log4j's start-up lines and what Spark's Python workers print (the stateful
    step's worker prints at every call) would otherwise break up a command's own output. Errors
    still reach the caller as exceptions. A running session is reused as it is, and a process
    keeps its first JVM (PySpark's `SparkContext._gateway`) for every later session.

    A driver JVM this call starts maps Spark's classes from the class-data archive that
    `ordo spark archive` made for this Java, Spark and SPARK_SUBMIT_OPTS, if there is one and
    ORDO_SPARK_CLASS_ARCHIVE is not `off` (`ordo.spark.class_archive`): it starts some 2 s
    sooner. The options go first in SPARK_SUBMIT_OPTS while Spark's launcher reads it, so that
    the user's options there and in `spark.driver.extraJavaOptions` (which follow them) still
    apply, and win; the process's SPARK_SUBMIT_OPTS is changed for that time (not thread-safe
    against another thread that reads or sets it then).

    `master` and `app_name` must be non-empty texts and `output` a path (a str too) or None:
    anything else is a ConfigurationError before the JVM starts (an AttributeError, or a JVM
    that failed to start).
    """
    for name, text in (("master", master), ("app_name", app_name)):
        if not isinstance(text, str) or not text.strip() or "\x00" in text:
            msg = f"{name} must be a non-empty text, got {text!r:.80}"
            raise ConfigurationError(msg)
    log = (
        None if output is None else arguments.path(output, name="output", error=ConfigurationError)
    )
    python_for_workers(master)
    conf = SparkConf().setMaster(master).setAppName(app_name).setAll(_SETTINGS)
    with _launch_environment(_launch_variables(master) if SparkContext._gateway is None else {}):
        if SparkContext._active_spark_context is None:
            _start_context(conf, master, log)
        session = SparkSession.builder.config(conf=conf).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session


def _start_context(conf: SparkConf, master: str, output: Path | None) -> None:
    """Start Spark's context with `conf`, and its JVM when this process has none yet.

    A JVM this call starts writes its stdout and stderr to `output` (replaced) when given.
    `conf` gets the shuffle partitions `shuffle_partitions` chooses, unless the JVM's defaults
    (spark-defaults.conf, `--conf` in PYSPARK_SUBMIT_ARGS) set them: theirs are kept. Set in
    the context's conf, they are every session's of the context (`newSession()`'s too).
    """
    gateway = SparkContext._gateway or _launched_gateway(conf, output)
    if not SparkConf(_jvm=gateway.jvm).contains(_SHUFFLE_PARTITIONS_KEY):
        processors = gateway.jvm.java.lang.Runtime.getRuntime().availableProcessors()
        conf.set(_SHUFFLE_PARTITIONS_KEY, str(shuffle_partitions(master, processors=processors)))
    if _LOCAL_MASTER.fullmatch(master):
        conf.setAll(file_system_settings(gateway.jvm))
    SparkContext(conf=conf, gateway=gateway)


def shuffle_partitions(master: str, *, processors: int) -> int:
    """A session's shuffle partitions: a local master's cores, else CLUSTER_SHUFFLE_PARTITIONS.

    `local` has one, `local[N]` and `local[N,F]` N, `local[*]` the JVM's `processors`.

    A streaming query's stateful step (the materializer's) has a RocksDB store per shuffle
    partition, each loaded and committed at every micro-batch: four of them on `local[2]` ran
    in two waves, a third of a small batch's time, and `local[*]` on a larger machine left
    cores idle. A cluster's cores are not known when its session starts. A query keeps the
    number of its first run in its checkpoint.
    """
    local = _LOCAL_MASTER.fullmatch(master)
    if local is None:
        return CLUSTER_SHUFFLE_PARTITIONS
    threads = local.group(1)
    if threads is None:
        return 1
    return processors if threads == "*" else max(1, int(threads))


def _launched_gateway(conf: SparkConf, output: Path | None) -> JavaGateway:
    """Start Spark's JVM, its stdout and stderr in `output` (replaced) when given; its gateway."""
    if output is None:
        return launch_gateway(conf)  # type: ignore[no-untyped-call]  # PySpark's own (untyped)
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("wb") as log:
        # popen_kwargs is PySpark's launcher's way to capture the JVM's output.
        return launch_gateway(  # type: ignore[no-untyped-call]
            conf, popen_kwargs={"stdout": log, "stderr": subprocess.STDOUT}
        )


def _launch_variables(master: str) -> dict[str, str]:
    """The environment Spark's launcher needs to start a driver JVM with ordo's additions.

    SPARK_SUBMIT_OPTS with the class archive's options in front: the launcher puts them, then
    the driver's extraJavaOptions, on the JVM's command line, and of two values of one -XX
    option the JVM takes the last: the user's. For a local master, SPARK_DIST_CLASSPATH with
    the local files' jar last (`ordo.spark.local_files`).
    """
    variables = {}
    options = driver_options(os.environ)
    if options is not None:
        before = os.environ.get(SUBMIT_OPTIONS_VARIABLE, "")
        variables[SUBMIT_OPTIONS_VARIABLE] = f"{options} {before}".strip()
    jar = local_files_jar(os.environ) if _LOCAL_MASTER.fullmatch(master) else None
    if jar is not None:
        before = os.environ.get(DIST_CLASSPATH_VARIABLE, "")
        variables[DIST_CLASSPATH_VARIABLE] = os.pathsep.join(filter(None, (before, str(jar))))
    return variables


@contextmanager
def _launch_environment(variables: Mapping[str, str]) -> Iterator[None]:
    """os.environ with `variables` set within the block; what they held before is put back.

    PySpark's launch_gateway hands Spark's launcher a copy of os.environ and takes no
    environment of its own. Not thread-safe against another thread that reads or sets them
    then.
    """
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value
