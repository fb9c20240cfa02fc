"""A thread's stop signal, which storage waits honour: stopping does not wait out an outage.

A tracking processor's threads make storage calls that, while the server is unreachable, wait
for a connection up to the pool's timeout (30 s on PostgreSQL). Stopping the processor sets an
event, but an event cannot reach into a call that is waiting: each thread waited out the call it
was in, then the release of its claims waited again (about a minute in all). The thread enters
`stops_waits_on(event)` instead, and the storage adapter asks `stop_signal()` while it waits: once
the event is set it waits at most STOPPING_WAIT more. The ports stay as they are: a stop event
threaded through every store and source method would be one more argument for each, and the
adapters that never wait this way (SQLite) would only carry it along.

A command's Ctrl-C flag (`ordo.interrupts.SignalFlag`) is such a signal too: an `ordo cdc
capture` whose PostgreSQL journal stopped answering held a stop for the pool's timeout while a
window registered its schemas. Waiting in slices that look at the flag ends the wait without
raising into the pool's internals, which a signal's KeyboardInterrupt would.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import timedelta
from typing import Protocol

STOPPING_WAIT = timedelta(seconds=1)
"""How long a wait for storage goes on once the stop signal is set.

Long enough for a healthy but busy pool to lend a connection (a stopping processor then still
releases its claims), short enough that stopping during an outage stays prompt.
"""


class Stop(Protocol):
    """What a loop that a stop ends looks at: a threading.Event, or a signal's flag.

    A signal's handler must take no lock, so a command's Ctrl-C flag is no Event
    (`ordo.interrupts.SignalFlag`); both have these two.
    """

    def is_set(self) -> bool:
        """Whether the stop came."""
        ...

    def wait(self, timeout: float) -> bool:
        """Whether the stop came, once it has or after `timeout` seconds."""
        ...


_signal: ContextVar[Stop | None] = ContextVar("ordo_stop_signal", default=None)


@contextmanager
def stops_waits_on(stop: Stop) -> Iterator[None]:
    """Within the block, this thread's waits for storage end soon after `stop` is set.

    Each thread (and asyncio task) has its own signal: entering the block in one thread changes
    nothing for the others.
    """
    token = _signal.set(stop)
    try:
        yield
    finally:
        _signal.reset(token)


def stop_signal() -> Stop | None:
    """The stop signal of the calling thread (`stops_waits_on`); None outside such a block."""
    return _signal.get()
