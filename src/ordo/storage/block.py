"""A context manager that opens what it manages anew for each `with` block, one at a time."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import TracebackType
from typing import TypeVar

from ordo.errors import AlreadyRunningError

T = TypeVar("T")


class OneBlockAtATime(AbstractContextManager[T]):
    """Opens `open_block()` for each `with` block; a block inside an open one is refused.

    What `contextlib.contextmanager` makes can be entered once: `events_by_tag_at(url)` entered
    a second time failed with contextlib's AttributeError ('args'). Its arguments say where to
    connect, so each block opening its own connections (and closing them at its end) is what
    a second block means. A block inside an open one is AlreadyRunningError, naming `what` (the
    function that made this), and leaves the open block as it was: which block's end closed
    which connections would depend on the order the blocks end in, which asyncio tasks or
    threads sharing the object do not keep. Thread-safe.
    """

    def __init__(self, open_block: Callable[[], AbstractContextManager[T]], *, what: str) -> None:
        self._open_block, self._what = open_block, what
        self._open: AbstractContextManager[T] | None = None
        self._lock = threading.Lock()

    def __enter__(self) -> T:
        with self._lock:
            if self._open is not None:
                msg = (
                    f"this {self._what}(...) is open: its `with` block must end before it is "
                    f"entered again (call {self._what}() again for a block of its own at once)"
                )
                raise AlreadyRunningError(msg)
            self._open = block = self._open_block()
        try:
            return block.__enter__()
        except BaseException:
            self._open = None
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        block, self._open = self._open, None
        assert block is not None  # noqa: S101 - __exit__ follows __enter__
        return block.__exit__(exc_type, exc, traceback)
