"""A command's work on a thread of its own, which Ctrl-C or SIGTERM stop between its steps.

Ctrl-C raises KeyboardInterrupt wherever the main thread is: inside a Py4J call (Spark's, see
`ordo.spark.interruption`), or inside a lock of a thread pool that a publish waits on, where
it left "cannot release un-acquired lock" (an `ordo cdc ingest` ended with that error, status 1,
now and then). Here a signal only sets a flag while the work runs on another thread; the main
thread, waiting in no call of its own, then raises KeyboardInterrupt, or `Terminated` for
SIGTERM (what a service manager stops a command with; exit status 143 where Ctrl-C's is 130).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from types import FrameType
from typing import NoReturn, TypeVar

T = TypeVar("T")

Handler = Callable[[int, FrameType | None], object]
"""A signal handler, as `signal.signal` takes one."""

CANCEL_INTERVAL_S = 0.2
"""How often an interrupted run cancels its work again until it has ended: a Spark job the
work starts after a cancel (the next of verify's jobs) is cancelled too."""
WORK_END_WAIT_S = 60.0
"""How long an interrupted run waits for its work to end (Spark answering the cancels, a publish
writing its last file) before it raises KeyboardInterrupt all the same; the work's thread is a
daemon and goes with the process."""


class Terminated(KeyboardInterrupt):
    """A stop by SIGTERM: a KeyboardInterrupt, so every Ctrl-C path handles it (status 143)."""


class _RaisedStop(BaseException):
    """A stop raised into a `stops_raising` block, which raises the flag's interrupt for it.

    No KeyboardInterrupt, so that what the block waits in does not take it for Ctrl-C:
    psycopg answers a KeyboardInterrupt in a statement's wait by cancelling the statement and
    then waiting for its end, 5 s each, so a stop on a server that stopped answering (a capture's
    new session asking for its lock) was held 10 s, for a session that is closed unused anyway.
    """


WAIT_NAP_S = 0.05
"""How often a thread waiting for a SignalFlag looks at it: how late at most it notices a stop."""


class SignalFlag:
    """A flag that a signal's handler sets; `received` is the first signal's number (None before).

    No lock is taken, as a handler must take none: Python runs it on the main thread between two
    bytecodes, also while that thread holds a lock. The flag was a threading.Event, whose set()
    waited for ever for its lock when a signal came while its thread held it: in the Event's
    wait (`run_interruptibly`'s), or in the set() of the handler of a first signal (Ctrl-C, then
    a service manager's SIGTERM). `receive` only stores the number, and `wait` looks at it every
    WAIT_NAP_S: a sleep that a handler interrupts goes on after it (PEP 475), so only a look
    can notice. (`signal.set_wakeup_fd` would wake the wait at once, but a process has one such
    fd, which nested flags and asyncio would contend for.)
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self.raising = False
        """Whether a signal raises its stop at once as well (`stops_raising`)."""

    def receive(self, number: int, _frame: FrameType | None = None) -> None:
        """Note the signal `number` unless one came before: a signal's handler (`Handler`).

        A second signal whose handler runs between the first's test and store stores its
        number, which the first's store then replaces: either stops. While `raising`, it
        raises the stop too, once (as `_RaisedStop`, which `stops_raising` turns into the
        flag's `interrupt()`).
        """
        if self.received is None:
            self.received = number
        if self.raising:
            self.raising = False
            raise _RaisedStop

    def is_set(self) -> bool:
        """Whether a signal came."""
        return self.received is not None

    def wait(self, timeout: float) -> bool:
        """Whether a signal came, once one has or after `timeout` seconds (at once if <= 0)."""
        deadline = time.monotonic() + timeout
        while self.received is None and (left := deadline - time.monotonic()) > 0:
            time.sleep(min(left, WAIT_NAP_S))
        return self.is_set()

    def interrupt(self) -> KeyboardInterrupt:
        """What the stop the flag took raises: Terminated for SIGTERM, else KeyboardInterrupt."""
        return Terminated() if self.received == signal.SIGTERM else KeyboardInterrupt()


@contextmanager
def handling(handler: Handler, *numbers: signal.Signals) -> Iterator[None]:
    """Within the block, `handler` handles the signals `numbers`; their handlers before after.

    Signals can be handled only on the main thread: elsewhere they keep their handlers.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.signal(number, handler) for number in numbers}
    try:
        yield
    finally:
        for number, before in previous.items():
            signal.signal(number, before)


def _terminate(_number: int, _frame: FrameType | None) -> NoReturn:
    raise Terminated


def terminable() -> AbstractContextManager[None]:
    """Within the block, SIGTERM raises Terminated on the main thread, as Ctrl-C raises.

    Its default action ended the process at once, without a command's line, and gave nothing
    it held back (`ordo.cli.termination`). A `stop_flag` within the block takes SIGTERM as a
    flag instead, up to its end.

    Signals can be handled only on the main thread: elsewhere SIGTERM keeps its handler.
    """
    return handling(_terminate, signal.SIGTERM)


@contextmanager
def stop_flag() -> Iterator[SignalFlag]:
    """A flag that Ctrl-C (SIGINT) or SIGTERM sets, in place of their handlers, in the block.

    Signals can be handled only on the main thread: elsewhere the flag stays unset.
    """
    flag = SignalFlag()
    with handling(flag.receive, signal.SIGINT, signal.SIGTERM):
        yield flag


@contextmanager
def stops_raising() -> Iterator[None]:
    """Within the block Ctrl-C or SIGTERM raise at once, though a `stop_flag` handles them.

    For a wait that nothing needs to complete and that may last: a connect to a server that
    does not answer (a dropped route, a frozen host) waits up to its connect_timeout, and a
    stop that only set the flag was held that long. A stop that came before raises on entry.
    Within, the stop is raised as no KeyboardInterrupt (`_RaisedStop`), so that no library
    takes it for Ctrl-C on its way out: it leaves the block as the flag's `interrupt()`.
    Off the main thread (a handler raises there, in whatever it does) or outside a `stop_flag`,
    it changes nothing.
    """
    flag = getattr(signal.getsignal(signal.SIGINT), "__self__", None)  # whose `receive` handles
    is_main = threading.current_thread() is threading.main_thread()
    if not is_main or not isinstance(flag, SignalFlag):
        yield
        return
    try:  # the outer try turns a stop raised anywhere up to `raising = False`, the finally too
        try:
            flag.raising = True
            if flag.is_set():  # came before: the handler raised nothing
                raise flag.interrupt()
            yield
        finally:
            flag.raising = False
    except _RaisedStop:
        raise flag.interrupt() from None


@contextmanager
def completing() -> Iterator[SignalFlag]:
    """The block runs to its end whatever Ctrl-C or SIGTERM come; then the first is raised.

    For work that a stop must not break into, such as a publish waiting for its file writers
    (the KeyboardInterrupt broke a lock of the thread pool: "release unlocked lock", status 1).
    The block may look at the flag it is given to end early at a point of its choosing (a
    capture between two windows), and let a wait of its own end at once (`stops_raising`). An
    exception the block raises leaves as it is.
    """
    with stop_flag() as stop:
        yield stop
    if stop.is_set():
        raise stop.interrupt()


def run_interruptibly(work: Callable[[], T], *, cancel: Callable[[], object] = lambda: None) -> T:
    """`work()` on a thread of its own while this one waits, SIGINT or SIGTERM setting a flag.

    What `work` returns is returned and what it raises is raised here. On Ctrl-C this thread
    calls `cancel()`, again every CANCEL_INTERVAL_S until `work` has ended (WORK_END_WAIT_S at
    most), then raises KeyboardInterrupt (Terminated for SIGTERM); what `work` returned or
    raised (a cancelled job's error) is dropped. Off the main thread `work` simply runs.
    """
    if threading.current_thread() is not threading.main_thread():
        return work()
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as exc:  # raised again on the waiting thread
            failure.append(exc)

    worker = threading.Thread(target=run, name="ordo-command-work", daemon=True)
    with stop_flag() as interrupted:
        worker.start()
        while worker.is_alive() and not interrupted.wait(CANCEL_INTERVAL_S):
            pass
        if interrupted.is_set():
            for _ in range(int(WORK_END_WAIT_S / CANCEL_INTERVAL_S)):
                cancel()
                worker.join(CANCEL_INTERVAL_S)
                if not worker.is_alive():
                    break
            raise interrupted.interrupt()
    if failure:
        raise failure[0]
    return outcome[0]
