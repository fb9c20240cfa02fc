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

from collections.abc import Iterator
from contextlib import contextmanager

import click

from ordo.cli.exit_status import interrupted_line, interrupted_status
from ordo.interrupts import terminable


@contextmanager
def interruptible(left: str) -> Iterator[None]:
    """Ctrl-C ends the block with one line and exit status 130 (not click's "Aborted!" and 1).

    The line, on stderr, is `left`: what the interrupted work leaves behind, then the stop's
    notes (`interrupted_line`). SIGTERM within `terminable()`, or during a Spark command's
    `run_job`, ends it so too, with status 143.
    """
    try:
        yield
    except KeyboardInterrupt as interrupt:
        # click's echo, not ordo.cli.options' `progress`: the root group imports this module
        # (`ordo.cli.lazy_commands`), and that one the stores, which `ordo --version` needs not
        click.echo(interrupted_line(left, interrupt), err=True)
        raise click.exceptions.Exit(interrupted_status(interrupt)) from None


@contextmanager
def stoppable(left: str) -> Iterator[None]:
    """`interruptible(left)` that SIGTERM ends too (`terminable()`).

    For a Spark command too, from its first step: its Spark calls take a stop as a flag
    (`job_session`, `run_job`). SIGTERM's handler is given back before the line is printed.
    """
    with interruptible(left), terminable():
        yield
