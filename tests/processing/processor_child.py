"""A tracking processor in its own process, for the multi-process tests.

    python processor_child.py URL THREADS SEGMENTS [STALL_AT] [HANDLE_MS]

Runs until SIGTERM (clean stop) or SIGKILL. The handler inserts every event into `applied`
(primary key: persistence id and position; `owner`: this process's id) in the batch's
transaction, after checking that the persistence id's previous position is there: applying an
event twice, or out of order, fails. With STALL_AT (`pid#nr`; `-` for none), the process stops
itself (SIGSTOP) right after inserting that event, the first time, in the middle of its batch: a
stalled process holding its locks. With HANDLE_MS, the handler takes that long per event: a
busy process.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from dataclasses import replace

from ordo.processing.processor import HandlerContext, TrackingProcessor
from ordo.query import EventEnvelope
from ordo.storage.open import open_stores
from processing_support import FAST, source

STALL_AT = sys.argv[4] if len(sys.argv) > 4 else None
HANDLE_S = int(sys.argv[5]) / 1000 if len(sys.argv) > 5 else 0.0
stalled = threading.Event()


def apply(event: EventEnvelope, context: HandlerContext) -> None:
    p, conn = context.placeholder, context.connection
    previous = conn.execute(
        f"SELECT count(*) FROM applied WHERE pid = {p} AND nr = {p}",
        (event.persistence_id, event.tag_pid_sequence_nr - 1),
    ).fetchone()[0]
    if event.tag_pid_sequence_nr > 1 and not previous:
        msg = f"{event.persistence_id}#{event.tag_pid_sequence_nr} before its predecessor"
        raise AssertionError(msg)
    conn.execute(
        f"INSERT INTO applied (pid, nr, owner) VALUES ({p}, {p}, {p})",
        (event.persistence_id, event.tag_pid_sequence_nr, str(os.getpid())),
    )
    if f"{event.persistence_id}#{event.tag_pid_sequence_nr}" == STALL_AT and not stalled.is_set():
        stalled.set()
        print("stalled", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
    time.sleep(HANDLE_S)


def main() -> None:
    url, threads, segments = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    stores = open_stores(url)
    settings = replace(FAST, thread_count=threads, initial_segment_count=segments)
    processor = TrackingProcessor(
        "applier", source(stores), stores.tokens, apply, settings=settings
    )
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    processor.start()
    print("started", flush=True)
    stopped.wait()
    processor.stop()
    stores.close()


if __name__ == "__main__":
    main()
