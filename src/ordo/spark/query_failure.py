"""A failed streaming query of an ordo job, said in one line."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.errors import StreamingQueryException

from ordo.errors import QueryFailedError

_TRACEBACK = "Traceback (most recent call last):\n"
_QUALIFIED = re.compile(r"^[\w.]+\.(\w+: )")
"""A module path before an exception's class name (`sqlite3.OperationalError: ...`)."""


@contextmanager
def query_failures(label: str) -> Iterator[None]:
    """A streaming query's failure in the block becomes QueryFailedError(`label failed: ...`).

    Spark's own exception, tracebacks and query plan included, stays the error's cause.
    """
    try:
        yield
    except StreamingQueryException as exc:
        msg = f"{label} failed: {failure_line(str(exc))}"
        raise QueryFailedError(msg) from exc


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
