"""Running a Spark streaming query from the command line until it ends or is interrupted."""

from __future__ import annotations

from typing import Any

import click


def wait_for(query: Any, label: str) -> None:
    """Wait for `query` (Ctrl-C stops it cleanly); its failure becomes a one-line error.

    `query` is a pyspark StreamingQuery (typed loosely: the CLI imports Spark lazily).
    """
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    failure = query.exception()
    if failure is not None:
        msg = f"{label} failed: {failure}"
        raise click.ClickException(" ".join(msg.split()))
