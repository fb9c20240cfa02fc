"""Running a Spark streaming query from the command line until it ends or is interrupted."""

from __future__ import annotations

from typing import Any

from ordo.cli.options import counted, progress

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
    for batch in query.recentProgress:
        if batch.batchId <= reported:
            continue
        reported = batch.batchId
        if batch.numInputRows:
            rows, seconds = counted(batch.numInputRows, "row"), batch.batchDuration / 1000
            progress(f"{label}: batch {batch.batchId}, {rows} in {seconds:.1f} s")
    return reported
