"""The bench scripts' count options: how many events, runs, keys or threads.

Imported by the bench scripts; running it directly does nothing (`make bench` runs every
bench/*.py file).
"""

from __future__ import annotations

import argparse

from ordo.arguments import integer_text


def positive_count(text: str) -> int:
    """A count of at least 1 in plain digits (the `ordo` command's form); else a usage error.

    The argparse `type` of every count option, so that a bad count is refused with a one-line
    message before anything runs. Checked after parsing, 0 went unseen: the scripts read an
    option not given as None and fill in their default size with `args.events or DEFAULT`,
    so `--events 0` ran the default workload; a negative count failed deep inside a run (a
    division by zero, `min()` of no runs) or waited for events never written.
    """
    try:
        value = integer_text(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    if value < 1:
        msg = f"{value} is not a count: it must be at least 1"
        raise argparse.ArgumentTypeError(msg)
    return value
