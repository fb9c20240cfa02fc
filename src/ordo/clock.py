"""Where time comes from: core code asks an injected Clock, never the system directly."""

from __future__ import annotations

import threading
import time
from typing import Protocol, cast

from ordo.errors import ConfigurationError


class Clock(Protocol):
    """A source of wall-clock time in epoch nanoseconds."""

    def now_ns(self) -> int:
        """Nanoseconds since the Unix epoch, UTC."""
        ...


def clock_or_system(clock: object, *, name: str = "clock") -> Clock:
    """`clock` when it has a `now_ns()`, a SystemClock for None.

    Raises:
        ConfigurationError: `clock` is something else, a falsy 0 or "" too (only None is
            the system clock); the call that takes it is refused before it opens or writes
            anything, so that a misplaced argument is named here rather than failing with
            AttributeError at the first reading, after open_journal created the journal.

    """
    if clock is None:
        return SystemClock()
    if not callable(getattr(clock, "now_ns", None)):
        msg = f"{name} must be a Clock (with now_ns()) or None, got {type(clock).__name__}"
        raise ConfigurationError(msg)
    return cast(Clock, clock)


class SystemClock:
    """The machine's clock. Thread-safe."""

    def now_ns(self) -> int:
        """Nanoseconds since the Unix epoch, from time.time_ns()."""
        return time.time_ns()


class SkewedClock:
    """Another clock shifted by a fixed amount: a writer whose clock is off. Thread-safe."""

    def __init__(self, base: Clock, *, skew_ns: int) -> None:
        self._base, self._skew_ns = base, skew_ns

    def now_ns(self) -> int:
        """The base clock's reading plus the skew."""
        return self._base.now_ns() + self._skew_ns


class ManualClock:
    """A clock that moves only when told to: for tests and the simulator. Thread-safe."""

    def __init__(self, start_ns: int) -> None:
        self._now_ns = start_ns
        self._lock = threading.Lock()

    def now_ns(self) -> int:
        """The current (manually set) reading."""
        with self._lock:
            return self._now_ns

    def advance(self, delta_ns: int) -> None:
        """Move the clock forward by delta_ns (must not be negative)."""
        if delta_ns < 0:
            msg = f"a clock cannot go backwards by advance(), got delta_ns={delta_ns}"
            raise ValueError(msg)
        with self._lock:
            self._now_ns += delta_ns
