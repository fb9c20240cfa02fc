"""A sync iterable as the async iterator process_in_parallel reads its source through."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import TypeVar

T = TypeVar("T")


class SyncElements(AsyncIterator[T]):
    """A sync iterable as an async iterator: one `next()` per `__anext__`, on the event loop."""

    def __init__(self, elements: Iterable[T]) -> None:
        self._iterator = iter(elements)

    async def __anext__(self) -> T:
        try:
            return next(self._iterator)
        except StopIteration:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        """Close the iterator if it is a generator, as an async generator source is closed."""
        close = getattr(self._iterator, "close", None)
        if close is not None:
            close()
