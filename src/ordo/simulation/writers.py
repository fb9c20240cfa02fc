"""Writer processes: each opens its own Journal and appends its share of a workload.

The demo runs them plainly; the simulator gives each its own clock skew, delays some of its
tag_views writes and paces it, like nodes of a cluster under load.
"""

from __future__ import annotations

import multiprocessing
import random
import signal
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path

from ordo.clock import SkewedClock, SystemClock
from ordo.errors import ConcurrencyConflictError, OrdoError
from ordo.interrupts import SignalFlag
from ordo.journal import AppendReceipt, Journal
from ordo.journal.event import NewEvent
from ordo.settings import EventsByTagSettings
from ordo.simulation.delayed_writes import DelayingTagViewStore
from ordo.simulation.workload import Workload, writer_batches
from ordo.simulation.writer_log import WriterLog
from ordo.storage.open import open_stores


@dataclass(frozen=True, slots=True, kw_only=True)
class WriterPlan:
    """How the writer processes behave; picklable (it crosses into each process)."""

    url: str
    workload: Workload
    settings: EventsByTagSettings
    skew_ms: int = 0
    """Each writer's clock is off by a fixed amount of up to skew_ms, behind or ahead."""
    max_delay_ms: int = 0
    """Delayed tag_views writes wait up to this long."""
    delay_probability: float = 0.0
    events_per_s: float | None = None
    """Total pace over all writers; None writes as fast as possible."""
    log_dir: str | None = None
    """Where writers log when each append started and each tag write was applied (JSON
    lines), if anywhere."""

    def skew_ns(self, writer: int) -> int:
        """The clock skew of one writer (repeatable from the workload's seed).

        Writers ranked in an order drawn from the seed are behind and ahead by turns, each by
        a size drawn from (0, skew_ms]: so whatever the seed, two writers or more with a skew
        have a clock behind (whose rows are late for the queries) and one ahead. Drawn each
        from [-skew_ms, +skew_ms], seed 1 (the default, and the tests') had every clock ahead.
        """
        if self.skew_ms == 0:
            return 0
        writers = self.workload.writers
        ranked = random.Random(self.workload.seed * 7_919).sample(range(writers), writers)
        size = random.Random(self.workload.seed * 7_919 + writer).randint(
            1, self.skew_ms * 1_000_000
        )
        return size if ranked.index(writer) % 2 else -size

    def writer_uuid(self, writer: int) -> str:
        """The writer uuid of one writer's journal (repeatable from the workload's seed)."""
        return str(
            uuid.UUID(int=random.Random(self.workload.seed * 104_729 + writer).getrandbits(128))
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteReport:
    """What the writer processes did."""

    events: int
    seconds: float
    failed_writers: tuple[int, ...]
    conflicts: int = 0
    """Appends that another writer beat to an id (then appended again after it)."""


MAX_ATTEMPTS = 100
"""Appends to one id in a row that may lose to other writers before a writer gives up."""


def _append(
    journal: Journal, pid: str, events: list[NewEvent], conflicts: Synchronized[int]
) -> tuple[AppendReceipt, int]:
    """Append after whatever is last, again after each writer that got there first.

    A conflict drops the journal's state of the id, so the next attempt recovers it: reads
    what the other writer appended (and its offsets) before numbering the events after it.
    Returns the receipt and when the attempt that wrote began (epoch ns, unskewed).
    """
    for _ in range(MAX_ATTEMPTS - 1):
        started_ns = time.time_ns()
        try:
            receipt = journal.append(pid, events)
        except ConcurrencyConflictError:
            with conflicts.get_lock():
                conflicts.value += 1
        else:
            return receipt, started_ns
    started_ns = time.time_ns()
    return journal.append(pid, events), started_ns


_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}
"""What stops a writer process: Ctrl-C to its group, SIGTERM from its parent (`_stop`)."""


def _write(
    plan: WriterPlan, writer: int, counter: Synchronized[int], conflicts: Synchronized[int]
) -> None:
    """A writer process: its share of the workload; Ctrl-C or SIGTERM stops it quietly.

    Ctrl-C reaches the whole process group; SIGTERM comes from the process that started it
    (`_stop`). run_writers starts this process with both blocked, so that one arriving while
    the interpreter starts is held until here. Either only sets the writer's `SignalFlag`:
    the writer stops between two appends and closes its journal (its writer lease deleted, its
    last tag writes flushed, its late ones applied at once), without a traceback of its own, and
    the process that started it reports it. A KeyboardInterrupt raised wherever the writer was
    broke off an append after its events were written, or the close: tagged events were left
    without their tag_views rows, which `ordo verify` reported missing.
    """
    stop = SignalFlag()
    for number in _STOP_SIGNALS:  # for the rest of the process: no stop may interrupt its end
        signal.signal(number, stop.receive)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    _write_share(plan, writer, counter, conflicts, stop)


def _write_share(
    plan: WriterPlan,
    writer: int,
    counter: Synchronized[int],
    conflicts: Synchronized[int],
    stop: SignalFlag,
) -> None:
    stores = open_stores(plan.url)
    log = WriterLog(Path(plan.log_dir) / f"writer-{writer}.jsonl") if plan.log_dir else None
    # Every write goes through the delaying store when there is a log, delayed or not: the
    # checker tells a loss the seeds allow from a real one by when rows became visible, and
    # a skewed clock makes rows late too (with --max-delay-ms 0 nothing was logged, and a
    # restart's allowed loss counted as lost).
    tag_views = (
        DelayingTagViewStore(
            stores.tag_views,
            max_delay_s=plan.max_delay_ms / 1000,
            delay_probability=plan.delay_probability,
            rng=random.Random(plan.workload.seed * 31 + writer),
            on_applied=log.applied if log is not None else None,
        )
        if plan.max_delay_ms > 0 or log is not None
        else None
    )
    journal = Journal(
        stores.journal,
        tag_views or stores.tag_views,
        settings=plan.settings,
        clock=SkewedClock(SystemClock(), skew_ns=plan.skew_ns(writer)),
        writer_uuid=plan.writer_uuid(writer),
    )
    pace = plan.events_per_s / plan.workload.writers if plan.events_per_s else None
    started, written = time.monotonic(), 0
    try:
        for pid, events in writer_batches(plan.workload, writer):
            if pace is not None:  # one pause lasts writers / --rate seconds (4 s at a rate of 1)
                stop.wait(started + written / pace - time.monotonic())
            if stop.is_set():
                break
            receipt, started_ns = _append(journal, pid, events, conflicts)
            if log is not None:
                log.appended(receipt, started_ns)
            written += len(events)
            with counter.get_lock():
                counter.value += len(events)
    finally:
        journal.close()
        if tag_views is not None:
            tag_views.close(at_once=stop.is_set)  # the parent waits a few seconds only
        if log is not None:
            log.close()
        stores.close()


_STOP_WAIT_S = 5.0
"""How long an interrupted run waits for its writers to close their journals before killing them."""


def _stop(processes: Sequence[BaseProcess]) -> None:
    """Stop the started writers (SIGTERM), wait for them to end, kill any still running, reap.

    Ctrl-C reached the writers already, but a SIGTERM to this process alone (a service manager,
    `kill`) did not: they wrote on after it had ended, their leases held. A writer's stop
    signal only sets its flag, so the SIGTERM does not break off the close that Ctrl-C began.
    """
    deadline = time.monotonic() + _STOP_WAIT_S
    started = [p for p in processes if p.pid is not None]
    for process in started:
        if process.is_alive():
            process.terminate()
    for process in started:
        process.join(max(0.0, deadline - time.monotonic()))
    for process in started:
        if process.is_alive():
            process.kill()
        process.join()


class WritersStopped(Exception):
    """The writers were stopped because `run_writers`' caller set its `stop` event."""


def run_writers(
    plan: WriterPlan,
    *,
    on_progress: Callable[[int], None],
    stop: threading.Event | None = None,
) -> WriteReport:
    """Start one process per writer, report progress every 100 ms, wait for all of them.

    Processes are spawned (not forked) so that no thread or connection of this process leaks
    into them. When the run is interrupted or fails while they run (an exception here, or the
    caller's `stop` set from another thread: WritersStopped), it stops them (`_stop`: SIGTERM,
    a kill after a few seconds) before raising: a writer must not write on to a journal its
    caller is about to delete (the simulator's temporary one), nor after its command ended. An
    SQLite journal's folder must exist (MissingFolderError): writers create none.
    """
    stopping = stop or threading.Event()  # an event nobody sets: they run to their end
    open_stores(plan.url).close()  # the schema once, before the writers race to create it
    context = multiprocessing.get_context("spawn")
    counter: Synchronized[int] = context.Value("q", 0)
    conflicts: Synchronized[int] = context.Value("q", 0)
    writers = range(plan.workload.writers)
    processes = [
        context.Process(target=_write, args=(plan, w, counter, conflicts), name=f"ordo-writer-{w}")
        for w in writers
    ]
    started = time.perf_counter()
    try:
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)  # inherited by each
        try:
            for process in processes:
                process.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        while any(p.is_alive() for p in processes):
            on_progress(counter.value)
            if stopping.wait(0.1):
                raise WritersStopped
    except BaseException:
        _stop(processes)
        raise
    for process in processes:
        process.join()
    on_progress(counter.value)
    failed = tuple(w for w, p in zip(writers, processes, strict=True) if p.exitcode != 0)
    if failed and counter.value == 0:
        msg = f"every writer process failed (exit codes {[p.exitcode for p in processes]})"
        raise OrdoError(msg)
    return WriteReport(
        events=counter.value,
        seconds=time.perf_counter() - started,
        failed_writers=failed,
        conflicts=conflicts.value,
    )
