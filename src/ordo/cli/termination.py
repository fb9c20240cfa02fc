"""SIGTERM, what a service manager (systemd, Kubernetes, `kill`) stops a command with.

Its default action ends the process at once, so nothing the command holds is given back: an
`ordo append` left its journal's writer lease, which refused a `reconcile rebuild` of the ids it
appended to for the lease timeout (30 s), and an `ordo simulate` left its writer processes
appending to the journal after it had ended. Within `terminable()` (`ordo.interrupts`) SIGTERM
raises `Terminated` instead, a KeyboardInterrupt, so that it takes the way Ctrl-C takes: every
`with` block closes what it opened, and the command ends with its one line and status 143
(128 + SIGTERM, the status a shell reports for a process that SIGTERM ended) where Ctrl-C's is
130.

Only where the command's Ctrl-C path is known to stop its work: a Spark command stops its
query or jobs by a flag it polls (`ordo.cli.streaming`, `ordo.spark.interruption`), not by an
exception raised into a Py4J call, so it may hold `stoppable()` (`terminable()` within
`interruptible()`) as the other commands do, from its first step: a stop while it imported
pyspark or checked its options, before its `job_session` held `terminable()`, got SIGTERM's
default action (status -15, no line), and Ctrl-C click's "Aborted!" and status 1.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

import click

from ordo.cli.options import progress
from ordo.interrupts import Terminated, terminable

INTERRUPTED_STATUS = 130
"""The exit status of a command ended by Ctrl-C, as shells report it (128 + SIGINT): how a
live query, a followed capture or a streaming job is stopped, so not click's "Aborted!" and 1."""

TERMINATED_STATUS = 128 + signal.SIGTERM
"""The exit status of a command that SIGTERM stopped within `terminable()` (143)."""


def interrupted_status(interrupt: KeyboardInterrupt) -> int:
    """The exit status of a command that `interrupt` stopped: 143 for SIGTERM, else 130."""
    return TERMINATED_STATUS if isinstance(interrupt, Terminated) else INTERRUPTED_STATUS


@contextmanager
def interruptible(left: str) -> Iterator[None]:
    """Ctrl-C ends the block with one line and exit status 130 (not click's "Aborted!" and 1).

    The line, on stderr, is `left`: what the interrupted work leaves behind, then the stop's
    notes (PEP 678), each after "; ", as an error's line ends with its notes (`cdc simulate`
    names the run it left in its sink once it has). SIGTERM within `terminable()`, or during a
    Spark command's `run_job`, ends it so too, with status 143.
    """
    try:
        yield
    except KeyboardInterrupt as interrupt:
        progress("; ".join([left, *getattr(interrupt, "__notes__", ())]))
        raise click.exceptions.Exit(interrupted_status(interrupt)) from None


@contextmanager
def stoppable(left: str) -> Iterator[None]:
    """`interruptible(left)` that SIGTERM ends too (`terminable()`).

    For a Spark command too, from its first step: its Spark calls take a stop as a flag
    (`job_session`, `run_job`). SIGTERM's handler is given back before the line is printed.
    """
    with interruptible(left), terminable():
        yield
