"""What a tracking processor's event handlers are given."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

from ordo.errors import ConfigurationError
from ordo.processing.connection import SqlConnection
from ordo.processing.segment import Segment
from ordo.query import EventEnvelope


@dataclass(frozen=True, slots=True, kw_only=True)
class HandlerContext:
    """What a handler knows besides the event."""

    processor: str
    segment: Segment
    is_replay: bool
    """The event was processed before the processor was reset (Axon's ReplayToken)."""
    connection: SqlConnection
    """The batch transaction's database connection: writes through it commit with the token."""
    placeholder: str
    """The connection's SQL parameter placeholder (`?` on SQLite, `%s` on PostgreSQL)."""


EventHandler = Callable[[EventEnvelope, HandlerContext], object]


def require_handler(handler: object, *, name: str | None = None) -> None:
    """ConfigurationError unless `handler` is callable and its call runs its body.

    Not callable, it failed on every event in the worker threads or Spark's tasks. An `async
    def` (or generator) function's call only makes a coroutine (or generator) that nothing
    awaits (or iterates): the body never ran, yet every event was recorded as processed.
    `name` is how errors show the handler (its repr by default).
    """
    if not callable(handler):
        msg = f"handler must be callable, got {handler!r:.80}"
        raise ConfigurationError(msg)
    for is_lazy, kind, result in _LAZY_FUNCTIONS:
        if is_lazy(handler) or is_lazy(type(handler).__call__):  # an object's __call__ too
            shown = f"{handler!r:.80}" if name is None else name
            msg = f"handler {shown} is {kind}: each call would return {result}, handling nothing"
            raise ConfigurationError(msg)


_LAZY_FUNCTIONS: tuple[tuple[Callable[[object], bool], str, str], ...] = (
    (inspect.iscoroutinefunction, "a coroutine function", "a coroutine that nothing awaits"),
    (
        inspect.isasyncgenfunction,
        "an asynchronous generator function",
        "an asynchronous generator that nothing iterates",
    ),
    (inspect.isgeneratorfunction, "a generator function", "a generator that nothing iterates"),
)
"""Functions whose call does not run their body: the test, what they are, what a call returns."""
