"""Running a Spark streaming query from the command line until it ends or is interrupted."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from ordo.cli.options import INTERRUPTED_STATUS, counted, progress
from ordo.errors import QueryFailedError

POLL_SECONDS = 2.0
"""How often the command looks for finished micro-batches to report (and for Ctrl-C)."""


def wait_for(query: Any, label: str) -> None:
    """Wait for `query`, reporting each micro-batch that read rows on stderr.

    Ctrl-C stops the query cleanly and exits with INTERRUPTED_STATUS after one line; a failure
    becomes a one-line QueryFailedError. `query` is a pyspark StreamingQuery (typed loosely: the
    CLI imports Spark lazily).
    """
    from ordo.spark.query_failure import query_failures

    reported = -1
    with _interruptible() as interrupted:
        try:
            with query_failures(label):
                while not query.awaitTermination(POLL_SECONDS) and not interrupted.is_set():
                    reported = _report(query, label, reported)
                query.stop()  # nothing to do unless interrupted: the query ended
        except QueryFailedError:
            if not interrupted.is_set():
                raise
            # Ctrl-C reaches Spark's Python workers too: a batch they ran failed of it.
    _report(query, label, reported)
    if interrupted.is_set():
        progress(f"{label} interrupted: stopped, it resumes from its checkpoint")
        raise click.exceptions.Exit(INTERRUPTED_STATUS)


@contextmanager
def _interruptible() -> Iterator[threading.Event]:
    """An event that SIGINT sets, in place of PySpark's handler, within the block.

    PySpark's handler raises KeyboardInterrupt wherever the main thread is, which is inside a
    Py4J call while a query is awaited: the gateway's connection breaks and Py4J prints its
    tracebacks. Off the main thread signals cannot be handled; the event then stays unset.
    """
    interrupted = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield interrupted
        return
    previous = signal.signal(signal.SIGINT, lambda _signal, _frame: interrupted.set())
    try:
        yield interrupted
    finally:
        signal.signal(signal.SIGINT, previous)


def _report(query: Any, label: str, reported: int) -> int:
    """Print the batches after `reported` that read rows; the last batch id seen."""
    for batch in query.recentProgress:
        if batch.batchId <= reported:
            continue
        reported = batch.batchId
        if batch.numInputRows:
            rows, seconds = counted(batch.numInputRows, "row"), batch.batchDuration / 1000
            progress(f"{label}: batch {batch.batchId}, {rows} in {seconds:.1f} s")
    return reported
