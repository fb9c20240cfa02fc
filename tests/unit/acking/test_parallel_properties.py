from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from ordo.acking import process_in_parallel
from ordo.errors import ElementFailedError


@dataclass(frozen=True)
class Element:
    key: str
    sleep_ms: int
    fails: bool = False


@dataclass
class Observed:
    """What the handlers and the source saw, checked after (and during) a run."""

    start_offset: int
    started: dict[str, list[int]] = field(default_factory=dict)
    running: set[str] = field(default_factory=set)
    handled: set[int] = field(default_factory=set)
    raised: list[int] = field(default_factory=list)
    pulled: int = 0
    finished: int = 0
    most_in_flight: int = 0

    def source(self, elements: list[Element]) -> Iterator[tuple[int, Element]]:
        for offset, element in enumerate(elements, start=self.start_offset):
            self.pulled += 1
            self.most_in_flight = max(self.most_in_flight, self.pulled - self.finished)
            yield offset, element

    async def handle(self, item: tuple[int, Element]) -> None:
        offset, element = item
        assert element.key not in self.running, "two elements of one key ran concurrently"
        self.running.add(element.key)
        self.started.setdefault(element.key, []).append(offset)
        try:
            await asyncio.sleep(element.sleep_ms / 1000)
            if element.fails:
                self.raised.append(offset)
                raise RuntimeError(offset)
            self.handled.add(offset)
        finally:
            self.running.discard(element.key)
            self.finished += 1

    def is_committable(self, offset: int) -> bool:
        return all(o in self.handled for o in range(self.start_offset, offset + 1))


def _key(item: tuple[int, Element]) -> str:
    return item[1].key


_element = st.builds(
    Element, key=st.sampled_from("abcd"), sleep_ms=st.integers(min_value=0, max_value=3)
)
_failing_element = st.builds(
    Element,
    key=st.sampled_from("abcd"),
    sleep_ms=st.integers(min_value=0, max_value=3),
    fails=st.integers(min_value=0, max_value=5).map(lambda n: n == 0),
)
_parallelism = st.integers(min_value=1, max_value=4)
_max_in_flight = st.integers(min_value=1, max_value=8)
_start_offset = st.integers(min_value=0, max_value=5)


async def _run(
    elements: list[Element],
    observed: Observed,
    **options: object,
) -> tuple[list[int], ElementFailedError | None]:
    yielded: list[int] = []
    offsets = process_in_parallel(
        observed.source(elements),
        observed.handle,
        key=_key,
        start_offset=observed.start_offset,
        **options,  # type: ignore[arg-type]
    )
    try:
        async for offset in offsets:
            assert observed.is_committable(offset), (
                f"{offset} yielded before its prefix was handled"
            )
            yielded.append(offset)
    except ElementFailedError as error:
        return yielded, error
    return yielded, None


def _check_key_order(elements: list[Element], observed: Observed) -> None:
    for key, offsets in observed.started.items():
        expected = [o for o, e in enumerate(elements, observed.start_offset) if e.key == key]
        assert offsets == expected[: len(offsets)]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(_element, max_size=20),
    _parallelism,
    _max_in_flight,
    st.integers(min_value=1, max_value=5),
    _start_offset,
)
def test_every_element_runs_in_key_order_and_the_last_offset_is_yielded(
    elements: list[Element],
    parallelism: int,
    max_in_flight: int,
    commit_every: int,
    start_offset: int,
) -> None:
    observed = Observed(start_offset)
    yielded, error = asyncio.run(
        _run(
            elements,
            observed,
            parallelism=parallelism,
            max_in_flight=max_in_flight,
            commit_every=commit_every,
            commit_interval=timedelta(hours=1),
        )
    )
    assert error is None
    _check_key_order(elements, observed)
    assert observed.handled == set(range(start_offset, start_offset + len(elements)))
    assert observed.most_in_flight <= max_in_flight
    assert yielded == sorted(set(yielded))
    assert yielded[-1:] == ([start_offset + len(elements) - 1] if elements else [])
    steps = [b - a for a, b in zip([start_offset - 1, *yielded], yielded[:-1], strict=False)]
    assert all(step >= commit_every for step in steps)


@settings(max_examples=40, deadline=None)
@given(st.lists(_failing_element, max_size=20), _parallelism, _max_in_flight, _start_offset)
def test_a_failure_reports_its_offset_and_what_may_be_committed(
    elements: list[Element], parallelism: int, max_in_flight: int, start_offset: int
) -> None:
    observed = Observed(start_offset)
    yielded, error = asyncio.run(
        _run(elements, observed, parallelism=parallelism, max_in_flight=max_in_flight)
    )
    _check_key_order(elements, observed)
    assert observed.most_in_flight <= max_in_flight
    assert yielded == sorted(set(yielded))
    if not any(e.fails for e in elements):
        assert error is None
        return
    assert error is not None
    assert error.offset == observed.raised[0]
    assert isinstance(error.cause, RuntimeError)
    assert observed.is_committable(error.committed)
    assert error.committed + 1 not in observed.handled
    assert error.committed < min(observed.raised)
    assert yielded[-1:] == ([error.committed] if error.committed >= start_offset else [])
    for failed in observed.raised:
        key = elements[failed - start_offset].key
        assert max(observed.started[key]) == failed, "an element after a failure of its key ran"
