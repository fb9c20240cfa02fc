"""Running a Spark streaming query from the command line until it ends or is interrupted."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import click

from ordo.cli.options import progress
from ordo.cli.termination import stoppable
from ordo.errors import QueryFailedError
from ordo.wording import counted

LOOK_SECONDS = 0.2
"""How often the command looks for Ctrl-C or SIGTERM and for a finished micro-batch to report:
how late at most it notices either. It looked every 2 s, so a stop was held up to 2 s (with the
query running on) and a batch was reported up to 2 s after it ended."""


def streaming_job(label: str) -> AbstractContextManager[None]:
    """Ctrl-C or SIGTERM before the job `label`'s query runs end it as during `wait_for`.

    Held from the command's first step: while it imports pyspark and checks its options, as
    while Spark starts or its query does (`stoppable`).
    """
    return stoppable(_interrupted(label))


@contextmanager
def streaming_session(
    label: str, checkpoint: str, *, master: str, app_name: str, executor_timeout_ms: int
) -> Iterator[Any]:
    """The Spark session of the streaming job `label`, which checkpoints at `checkpoint`.

    Within the command's `streaming_job(label)`; a second copy of the job (its checkpoint
    locked) is refused before Spark starts. The session is a SparkSession (typed loosely: the
    CLI imports Spark lazily).
    """
    from ordo.spark.checkpoint import checkpoint_lock
    from ordo.spark.job_session import job_session

    with (
        checkpoint_lock(checkpoint, label),
        job_session(
            master=master,
            app_name=app_name,
            executor_timeout_ms=executor_timeout_ms,
            announce=progress,
        ) as spark,
    ):
        yield spark


def start_query(spark: Any, label: str, start: Callable[[], Any]) -> Any:
    """The streaming query `start()` starts on `spark`, once Spark has started it.

    Spark refusing to start it is a one-line QueryFailedError; Ctrl-C meanwhile stops it and
    raises KeyboardInterrupt (`run_job`), which `streaming_job` turns into the job's line.
    `spark` is a SparkSession and the query a StreamingQuery (typed loosely: the CLI imports
    Spark lazily).
    """
    from ordo.spark.interruption import run_job
    from ordo.spark.query_failure import query_failures

    with query_failures(label):
        return run_job(spark, start)


def wait_for(query: Any, label: str) -> None:
    """Wait for `query`, reporting each micro-batch that read rows on stderr.

    Ctrl-C stops the query cleanly and exits with INTERRUPTED_STATUS (130) after one line; a
    failure becomes a one-line QueryFailedError. SIGTERM, what a service manager stops a job
    with, does the same with status 143 (128 + SIGTERM, as for a process it ends): its default
    action ended the process at once, the query unstopped, so its projection's lease stayed and
    a reset right after was refused as of a running projection. `query` is a pyspark
    StreamingQuery (typed loosely: the CLI imports Spark lazily).
    """
    from ordo.interrupts import stop_flag
    from ordo.spark.query_failure import query_failures

    reported = -1
    # awaitTermination is a Py4J call: see interruption
    with stop_flag() as interrupted:
        try:
            with query_failures(label):
                while not query.awaitTermination(LOOK_SECONDS) and not interrupted.is_set():
                    reported = _report(query, label, reported)
                query.stop()  # nothing to do unless interrupted: the query ended
        except QueryFailedError:
            if not interrupted.is_set():
                raise
            # Ctrl-C reaches Spark's Python workers too: a batch they ran failed of it.
    _report(query, label, reported)
    if interrupted.received is not None:
        progress(_interrupted(label))
        raise click.exceptions.Exit(128 + interrupted.received)


def _interrupted(label: str) -> str:
    """The line of a streaming job ended by Ctrl-C (or, once its query runs, SIGTERM)."""
    return f"{label} interrupted: stopped, it resumes from its checkpoint"


def _report(query: Any, label: str, reported: int) -> int:
    """Print the batches after `reported` that read rows; the last batch id seen.

    The query's last progress is looked at first, so that a look that finds no new batch (most
    of them, every LOOK_SECONDS) does not read the recent ones (up to 100 progress documents).
    """
    last = query.lastProgress
    if last is None or last.batchId <= reported:
        return reported
    for batch in query.recentProgress:
        if batch.batchId <= reported:
            continue
        reported = batch.batchId
        if batch.numInputRows:
            rows, seconds = counted(batch.numInputRows, "row"), batch.batchDuration / 1000
            progress(f"{label}: batch {batch.batchId}, {rows} in {seconds:.1f} s")
    return reported
