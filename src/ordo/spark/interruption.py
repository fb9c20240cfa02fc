"""Ctrl-C during a command's Spark work: its jobs cancelled, then one KeyboardInterrupt.

PySpark's SIGINT handler (which a SparkContext started on the main thread installs) calls
`cancelAllJobs()` and raises KeyboardInterrupt wherever the main thread is. That is nearly always
inside a Py4J call waiting for the JVM, and Py4J gives each thread one connection: the handler's
call reentered the connection the interrupted call was reading ("reentrant call inside
<_io.BufferedReader>"), Py4J logged some 50 lines of tracebacks, and the command ended with
click's "Aborted!". Here SIGINT only sets a flag while the Spark calls block another thread, and
the main thread, in no Py4J call of its own, cancels. `job_session` starts the session with
`run_interruptibly` as well: started off the main thread, a SparkContext installs no handler.
SIGTERM, what a service manager stops a command with, is handled so too and raised as
`Terminated` (status 143): its default action ended the command without its line, and left the
folder of the Python workers' launcher (`ordo.spark.worker_python`) and the command's own
temporary folders behind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from pyspark.sql import SparkSession

from ordo.interrupts import run_interruptibly

T = TypeVar("T")


def run_job(spark: SparkSession, work: Callable[[], T]) -> T:
    """`work()`, which runs Spark jobs or streaming queries on `spark`, stoppable by Ctrl-C.

    The commands that run Spark (verify, reconcile rebuild --all, demo, cdc simulate, and the
    start of a pipeline's or materializer's query) call it on the main thread. On Ctrl-C, Spark's
    jobs are cancelled and its streaming queries stopped until `work` has ended: see
    `run_interruptibly`.
    """
    return run_interruptibly(work, cancel=lambda: _cancel(spark))


def _cancel(spark: SparkSession) -> None:
    """Cancel `spark`'s running jobs and stop its streaming queries."""
    spark.sparkContext.cancelAllJobs()
    for query in spark.streams.active:
        query.stop()
