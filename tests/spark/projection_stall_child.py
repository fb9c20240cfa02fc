"""One projection batch in a process that stops itself inside it, for the stalled-task test.

python projection_stall_child.py SINK_URL ROWS_FILE CLAIM_TIMEOUT_MS

Applies the pickled rows (a segment's micro-batch) with apply_partition, the executors' write
path, under a ProjectionSpec with that claim timeout. The demo's handler counts the events; after
the first one it prints "stalled" and stops the process (SIGSTOP), the first time: a task frozen
(a paused VM, a debugger) while its batch transaction holds the rows it reserved and wrote.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
from datetime import timedelta
from pathlib import Path

from ordo.processing import HandlerContext
from ordo.query import EventEnvelope
from ordo.spark import ProjectionSpec
from ordo.spark.demo import count_order_events
from ordo.spark.projection import apply_partition

stalled = threading.Event()


def count_then_stall(event: EventEnvelope, context: HandlerContext) -> None:
    count_order_events(event, context)
    if not stalled.is_set():
        stalled.set()
        print("stalled", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)


def main() -> None:
    url, rows_file, claim_timeout_ms = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    spec = ProjectionSpec(
        processor="totals",
        sink=url,
        handler=count_then_stall,
        claim_timeout=timedelta(milliseconds=claim_timeout_ms),
    )
    rows = pickle.loads(rows_file.read_bytes())  # noqa: S301 - the test wrote it, from Spark
    apply_partition(spec, iter(rows))


if __name__ == "__main__":
    main()
