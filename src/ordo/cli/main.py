"""Entry point of `ordo`: a stop while the command line imports ends as a stopped command does.

The console script (pyproject's [project.scripts]), `python -m ordo` and `python -m
ordo.cli.main` run `main`. Importing the command line (click, the root group: about 0.1 s) and
then the command's modules (0.1 - 0.2 s more; pyspark is imported later, within the command's
own handling) is part of every run, before any command holds a stop: Ctrl-C there ended the run
with Python's KeyboardInterrupt traceback (status -2), or click's "Aborted!" and status 1 once
the command's module was being imported, and SIGTERM by its default action (status -15, no
line). So this module imports nothing of the command line: `main` imports the root group within
the handling of both, and the root group imports a command's module within it too
(`ordo.cli.lazy_commands`). A stop in either ends the run with one line,
`STARTING_INTERRUPTED`, and status 130, or 143 for SIGTERM (`ordo.cli.exit_status`, which
`ordo.cli.termination` ends a stopped command's work with).

The window left is the one before `main` runs, about 40 ms of a journal command's 0.2 s start:
Python's own start (some 15 ms), the import of `ordo` (its errors, and `typing`: some 25 ms)
and that of this module's two imports (`signal`, `threading` and two small modules of ordo:
some 5 ms). A stop there gets Python's default: Ctrl-C's traceback, SIGTERM's default action.
"""

from __future__ import annotations

import sys

from ordo.cli.exit_status import STARTING_INTERRUPTED, interrupted_line, interrupted_status
from ordo.interrupts import terminable


def main() -> None:
    """Run `ordo` on the process's arguments; a stop while its root group imports ends it.

    SIGTERM raises only while the root group imports (`terminable()`): a command that holds
    no stop of its own keeps SIGTERM's default action, as it had.
    """
    try:
        with terminable():
            from ordo.cli.root import cli
    except KeyboardInterrupt as interrupt:
        print(interrupted_line(STARTING_INTERRUPTED, interrupt), file=sys.stderr)
        sys.exit(interrupted_status(interrupt))
    cli(prog_name="ordo")


if __name__ == "__main__":
    main()
