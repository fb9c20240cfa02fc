"""Create (or extend) an SQLite journal with events tagged "order", for the example pipeline.

    python make_journal.py /abs/path/journal.db [--events 30] [--first-time-bucket yyyyMMddTHH:mm]

Prints the two environment variables the pipeline reads (ORDO_JOURNAL, ORDO_FIRST_TIME_BUCKET).
Appending again to the same journal continues each order's sequence numbers, so a second
`spark-pipelines run` appends only the new events to the streaming table.
"""

from __future__ import annotations

import argparse
import time
from datetime import timedelta
from pathlib import Path

from ordo import EventsByTagSettings, NewEvent, open_journal
from ordo.errors import OrdoError
from ordo.time import format_first_time_bucket

ORDERS = 3
"""Events go round-robin to the persistence ids order-0 .. order-2."""


def make_journal(path: Path, events: int, first_time_bucket: str) -> str:
    """Append `events` events tagged "order" (and every third also "priority"); the URL."""
    url = f"sqlite:///{path.resolve()}"
    settings = EventsByTagSettings(first_time_bucket=first_time_bucket, flush_interval=timedelta(0))
    with open_journal(url, settings=settings) as journal:
        for i in range(events):
            tags = ["order", "priority"] if i % 3 == 0 else ["order"]
            journal.append(
                f"order-{i % ORDERS}",
                [NewEvent.of({"i": i, "amount": 10 * (i + 1)}, tags=tags)],
            )
    return url


def _count(text: str) -> int:
    """How many events: 0 or more (a negative count wrote nothing and said nothing)."""
    count = int(text)
    if count < 0:
        msg = f"{count} is not a count: it must be at least 0"
        raise argparse.ArgumentTypeError(msg)
    return count


def main() -> None:
    """Parse the arguments, write the events, print the environment for the pipeline.

    A path or first time bucket ordo refuses is a one-line usage error, as on `ordo`'s own
    command line, not the traceback of its OrdoError.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="the SQLite file (created if missing)")
    parser.add_argument("--events", type=_count, default=30, help="how many events to append")
    parser.add_argument(
        "--first-time-bucket",
        default=format_first_time_bucket(time.time_ns() // 1_000_000 - 3_600_000),
        help="the journal's first time bucket (default: an hour ago; keep it when extending)",
    )
    args = parser.parse_args()
    try:
        url = make_journal(args.path, args.events, args.first_time_bucket)
    except OrdoError as exc:
        parser.error(str(exc))
    print(f"export ORDO_JOURNAL='{url}'")
    print(f"export ORDO_FIRST_TIME_BUCKET='{args.first_time_bucket}'")


if __name__ == "__main__":
    main()
