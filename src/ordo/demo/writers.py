"""Writer processes: each opens its own Journal and appends its share of the workload."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.sharedctypes import Synchronized

from ordo.demo.workload import Workload, writer_batches
from ordo.errors import OrdoError
from ordo.settings import EventsByTagSettings
from ordo.storage.open import init_storage, open_journal


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteReport:
    """What the writer processes did."""

    events: int
    seconds: float
    failed_writers: tuple[int, ...]


def _write(
    url: str,
    workload: Workload,
    writer: int,
    settings: EventsByTagSettings,
    counter: Synchronized[int],
) -> None:
    with open_journal(url, settings=settings) as journal:
        for pid, events in writer_batches(workload, writer):
            journal.append(pid, events)
            with counter.get_lock():
                counter.value += len(events)


def run_writers(
    url: str,
    workload: Workload,
    *,
    settings: EventsByTagSettings,
    on_progress: Callable[[int], None],
) -> WriteReport:
    """Start one process per writer, report progress every 100 ms, wait for all of them.

    Processes are spawned (not forked) so that no thread or connection of this process leaks
    into them.
    """
    init_storage(url)  # once, before the writers race to create the schema
    context = multiprocessing.get_context("spawn")
    counter: Synchronized[int] = context.Value("q", 0)
    processes = [
        context.Process(
            target=_write,
            args=(url, workload, writer, settings, counter),
            name=f"ordo-writer-{writer}",
        )
        for writer in range(workload.writers)
    ]
    started = time.perf_counter()
    for process in processes:
        process.start()
    while any(p.is_alive() for p in processes):
        on_progress(counter.value)
        time.sleep(0.1)
    for process in processes:
        process.join()
    on_progress(counter.value)
    failed = tuple(i for i, p in enumerate(processes) if p.exitcode != 0)
    if failed and counter.value == 0:
        msg = f"every writer process failed (exit codes {[p.exitcode for p in processes]})"
        raise OrdoError(msg)
    return WriteReport(
        events=counter.value, seconds=time.perf_counter() - started, failed_writers=failed
    )
