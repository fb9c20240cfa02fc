"""Running a Spark streaming query from the command line until it ends or is interrupted."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

POLL_SECONDS = 2.0
"""How often the command looks for finished micro-batches to report."""
_TRACEBACK = "Traceback (most recent call last):\n"
_QUALIFIED = re.compile(r"^[\w.]+\.(\w+: )")
"""A module path before an exception's class name (`sqlite3.OperationalError: ...`)."""


def wait_for(query: Any, label: str) -> None:
    """Wait for `query`, reporting each micro-batch that read rows on stderr.

    Ctrl-C stops the query cleanly; its failure becomes one error line (`failures_as_one_line`).
    `query` is a pyspark StreamingQuery (typed loosely: the CLI imports Spark lazily).
    """
    reported = -1
    with failures_as_one_line(label):
        try:
            while not query.awaitTermination(POLL_SECONDS):
                reported = _report(query, label, reported)
        except KeyboardInterrupt:
            query.stop()
    _report(query, label, reported)


@contextmanager
def failures_as_one_line(label: str) -> Iterator[None]:
    """A streaming query's failure in the block becomes one error line: `label failed: ...`.

    The line names the exception raised in Spark's Python worker (or Spark's own first line,
    see `failure_line`); --debug keeps the whole exception.
    """
    from pyspark.errors import StreamingQueryException

    try:
        yield
    except StreamingQueryException as exc:
        if click.get_current_context().find_root().params.get("debug"):
            raise
        msg = f"{label} failed: {failure_line(str(exc))}"
        raise click.ClickException(msg) from exc


def failure_line(message: str) -> str:
    """The line of a failed query's message that says what failed.

    Spark's message holds the Python tracebacks of the failure (a worker's inside the driver's
    for a foreachBatch sink); the exception of the last one is the one raised first, named by
    its class as ordo's own one-line errors are. Without a traceback: Spark's first line.
    """
    head, *tracebacks = message.split("\n=== Streaming Query ===")[0].split(_TRACEBACK)
    lines = tracebacks[-1].splitlines() if tracebacks else []
    raised = [line for line in lines if line and not line[0].isspace()]
    line = _QUALIFIED.sub(r"\1", raised[0]) if raised else head.strip().splitlines()[0]
    return " ".join(line.split())


def _report(query: Any, label: str, reported: int) -> int:
    """Print the batches after `reported` that read rows; the last batch id seen."""
    for progress in query.recentProgress:
        if progress.batchId <= reported:
            continue
        reported = progress.batchId
        if progress.numInputRows:
            click.echo(
                f"{label}: batch {progress.batchId}, {progress.numInputRows:,} rows in "
                f"{progress.batchDuration / 1000:.1f} s",
                err=True,
            )
    return reported
