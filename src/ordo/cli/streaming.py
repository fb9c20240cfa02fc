"""Running a Spark streaming query from the command line until it ends or is interrupted."""

from __future__ import annotations

from typing import Any

import click

from ordo.cli.options import counted

POLL_SECONDS = 2.0
"""How often the command looks for finished micro-batches to report."""


def wait_for(query: Any, label: str) -> None:
    """Wait for `query`, reporting each micro-batch that read rows on stderr.

    Ctrl-C stops the query cleanly; its failure becomes a one-line QueryFailedError.
    `query` is a pyspark StreamingQuery (typed loosely: the CLI imports Spark lazily).
    """
    from ordo.spark.query_failure import query_failures

    reported = -1
    with query_failures(label):
        try:
            while not query.awaitTermination(POLL_SECONDS):
                reported = _report(query, label, reported)
        except KeyboardInterrupt:
            query.stop()
    _report(query, label, reported)


def _report(query: Any, label: str, reported: int) -> int:
    """Print the batches after `reported` that read rows; the last batch id seen."""
    for progress in query.recentProgress:
        if progress.batchId <= reported:
            continue
        reported = progress.batchId
        if progress.numInputRows:
            click.echo(
                f"{label}: batch {progress.batchId}, {counted(progress.numInputRows, 'row')} in "
                f"{progress.batchDuration / 1000:.1f} s",
                err=True,
            )
    return reported
