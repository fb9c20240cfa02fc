"""How a command that Ctrl-C or SIGTERM stopped ends: one line on stderr, then status 130 or 143.

Shared by the two places that end a stopped run so: `ordo.cli.termination`, around a command's
work, and `ordo.cli.main`, around the command line's imports, which imports this module before
them and so needs it to import no more than the standard library and `ordo.interrupts`.
"""

from __future__ import annotations

import signal

from ordo.interrupts import Terminated

INTERRUPTED_STATUS = 130
"""The exit status of a command ended by Ctrl-C, as shells report it (128 + SIGINT): how a
live query, a followed capture or a streaming job is stopped, so not click's "Aborted!" and 1."""

TERMINATED_STATUS = 128 + signal.SIGTERM
"""The exit status of a command that SIGTERM stopped within `terminable()` (143)."""

STARTING_INTERRUPTED = "ordo interrupted while starting: nothing done"
"""The line of a run stopped while it imported the command line or its command's modules."""


def interrupted_status(interrupt: KeyboardInterrupt) -> int:
    """The exit status of a command that `interrupt` stopped: 143 for SIGTERM, else 130."""
    return TERMINATED_STATUS if isinstance(interrupt, Terminated) else INTERRUPTED_STATUS


def interrupted_line(left: str, interrupt: KeyboardInterrupt) -> str:
    """The line of a command that `interrupt` stopped.

    `left`, what the stopped work leaves behind, then the stop's notes (PEP 678), each after
    "; ", as an error's line ends with its notes (`cdc simulate` names the run it left in its
    sink once it has).
    """
    return "; ".join([left, *getattr(interrupt, "__notes__", ())])
