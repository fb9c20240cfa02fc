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

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TypeVar

from pyspark.sql import SparkSession

from ordo.terminated import Terminated

T = TypeVar("T")

CANCEL_INTERVAL_S = 0.2
"""How often an interrupted run cancels Spark's jobs again until its work has ended: a job the
work starts after a cancel (the next of verify's jobs) is cancelled too."""
WORK_END_WAIT_S = 60.0
"""How long an interrupted run waits for its work to end (Spark answering the cancels) before
it raises KeyboardInterrupt all the same; the work's thread is a daemon and goes with the
process."""


class SignalFlag(threading.Event):
    """An event that a signal sets; `received` is the first signal's number (None before)."""

    def __init__(self) -> None:
        super().__init__()
        self.received: int | None = None

    def receive(self, number: int) -> None:
        """Set the event, keeping the first signal's number."""
        if self.received is None:
            self.received = number
        self.set()


@contextmanager
def signal_flag(*numbers: signal.Signals) -> Iterator[SignalFlag]:
    """A flag that the signals `numbers` set, in place of their handlers before, in the block.

    Signals can be handled only on the main thread: elsewhere the flag stays unset.
    """
    flag = SignalFlag()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    previous = {
        number: signal.signal(number, lambda received, _frame: flag.receive(received))
        for number in numbers
    }
    try:
        yield flag
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def sigint_flag() -> AbstractContextManager[SignalFlag]:
    """A flag that SIGINT sets, in place of the handler before (PySpark's), within the block."""
    return signal_flag(signal.SIGINT)


def run_job(spark: SparkSession, work: Callable[[], T]) -> T:
    """`work()`, which runs Spark jobs or streaming queries on `spark`, stoppable by Ctrl-C.

    The commands that run Spark (verify, reconcile rebuild --all, demo, cdc simulate, and the
    start of a pipeline's or materializer's query) call it on the main thread. On Ctrl-C, Spark's
    jobs are cancelled and its streaming queries stopped until `work` has ended: see
    `run_interruptibly`.
    """
    return run_interruptibly(work, cancel=lambda: _cancel(spark))


def run_interruptibly(work: Callable[[], T], *, cancel: Callable[[], object] = lambda: None) -> T:
    """`work()` on a thread of its own while this one waits, SIGINT or SIGTERM setting a flag.

    What `work` returns is returned and what it raises is raised here. On Ctrl-C this thread
    calls `cancel()`, again every CANCEL_INTERVAL_S until `work` has ended (WORK_END_WAIT_S at
    most), then raises KeyboardInterrupt (Terminated for SIGTERM); what `work` returned or
    raised (a cancelled job's error) is dropped. Off the main thread `work` simply runs.
    """
    if threading.current_thread() is not threading.main_thread():
        return work()
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as exc:  # raised again on the waiting thread
            failure.append(exc)

    worker = threading.Thread(target=run, name="ordo-spark-call", daemon=True)
    with signal_flag(signal.SIGINT, signal.SIGTERM) as interrupted:
        worker.start()
        while worker.is_alive() and not interrupted.wait(CANCEL_INTERVAL_S):
            pass
        if interrupted.is_set():
            for _ in range(int(WORK_END_WAIT_S / CANCEL_INTERVAL_S)):
                cancel()
                worker.join(CANCEL_INTERVAL_S)
                if not worker.is_alive():
                    break
            raise Terminated if interrupted.received == signal.SIGTERM else KeyboardInterrupt
    if failure:
        raise failure[0]
    return outcome[0]


def _cancel(spark: SparkSession) -> None:
    """Cancel `spark`'s running jobs and stop its streaming queries."""
    spark.sparkContext.cancelAllJobs()
    for query in spark.streams.active:
        query.stop()
