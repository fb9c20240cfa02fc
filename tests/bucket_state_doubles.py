"""Spark's state of the materializer's stateful step, in memory: the step runs without Spark.

`BucketState` and `ChangeFoldProcessor` are tested against these: the calls they make of
Spark's MapState, ValueState and StatefulProcessorHandle, and no more.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class FakeMapState:
    """The MapState calls BucketState makes, in memory, counting round trips."""

    def __init__(self) -> None:
        self.entries: dict[int, str] = {}
        self.calls = 0

    def getValue(self, key: tuple[int]) -> tuple[str] | None:
        self.calls += 1
        value = self.entries.get(key[0])
        return None if value is None else (value,)

    def updateValue(self, key: tuple[int], value: tuple[str]) -> None:
        self.calls += 1
        self.entries[key[0]] = value[0]

    def iterator(self) -> Iterator[tuple[tuple[int], tuple[str]]]:
        self.calls += 1
        return iter([((k,), (v,)) for k, v in self.entries.items()])

    def clear(self) -> None:
        self.calls += 1
        self.entries.clear()


class FakeValueState:
    def __init__(self) -> None:
        self.value: tuple[Any, ...] | None = None

    def get(self) -> tuple[Any, ...] | None:
        return self.value

    def update(self, value: tuple[Any, ...]) -> None:
        self.value = value


class FakeHandle:
    """The StatefulProcessorHandle calls `ChangeFoldProcessor.init` makes: one bucket's state."""

    def __init__(self) -> None:
        self.slots, self.bucket = FakeMapState(), FakeValueState()

    def getMapState(self, *_: object) -> FakeMapState:
        return self.slots

    def getValueState(self, *_: object) -> FakeValueState:
        return self.bucket
