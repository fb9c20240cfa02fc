"""A failed streaming query of an ordo job, said in one line."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from py4j.protocol import Py4JError, Py4JJavaError
from pyspark.errors import PySparkException, StreamingQueryException

from ordo.errors import QueryFailedError

_TRACEBACK = "Traceback (most recent call last):\n"
_QUALIFIED = re.compile(r"^[\w.]+\.(\w+: )")
"""A module path before an exception's class name (`sqlite3.OperationalError: ...`)."""


@contextmanager
def query_failures(label: str) -> Iterator[None]:
    """A Spark error in the block becomes QueryFailedError(`label failed: ...`).

    A streaming query's failure, and also Spark's refusal to start one (a checkpoint location
    it cannot use, an analysis error): those came out of Py4J as a Java stack trace of a
    hundred lines. Spark's own exception, tracebacks and query plan included, stays the
    error's cause.
    """
    try:
        yield
    except StreamingQueryException as exc:
        msg = f"{label} failed: {failure_line(str(exc))}"
        raise QueryFailedError(msg) from exc
    except (PySparkException, Py4JJavaError) as exc:
        msg = f"{label} failed: {failure_line(_spark_message(exc))}"
        raise QueryFailedError(msg) from exc


def _spark_message(exc: Exception) -> str:
    """The text that says what a Spark error is about.

    A Java exception that PySpark does not convert (Py4JJavaError) says only which Py4J call
    failed; the Java exception's own `toString()` names it and its message.
    """
    if isinstance(exc, Py4JJavaError):
        try:
            return str(exc.java_exception.toString())
        except Py4JError:  # the gateway is gone: the Java exception cannot be asked any more
            return str(exc.errmsg)
    return str(exc)


def failure_line(message: str) -> str:
    """The line of a failed query's message that says what failed.

    Spark's message holds the Python tracebacks of the failure: a worker's inside the driver's
    for a foreachBatch sink, or the data source's error followed by one that PySpark raised
    while handling it. The line is the exception of the last of them that ordo raised, else of
    the last that neither PySpark nor Py4J raised (a handler's), named by its class as ordo's
    own one-line errors are. Without a traceback: Spark's first line.
    """
    head, *tracebacks = message.split("\n=== Streaming Query ===")[0].split(_TRACEBACK)
    raised = [_exception_line(traceback) for traceback in tracebacks]
    ordo = [line for line in raised if line.startswith("ordo.")]
    theirs = [line for line in raised if line and not line.startswith(("pyspark.", "py4j."))]
    chosen = (ordo or theirs or [head.strip().splitlines()[0]])[-1]
    return " ".join(_QUALIFIED.sub(r"\1", chosen).split())


def _exception_line(traceback: str) -> str:
    """The exception line that ends a traceback's frames ("" when there is none)."""
    return next((line for line in traceback.splitlines() if line and not line[0].isspace()), "")
