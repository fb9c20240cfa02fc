from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Awaitable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from ordo.acking import process_in_parallel
from ordo.errors import (
    ConfigurationError,
    ElementFailedError,
    ElementTimeoutError,
    InvalidInputError,
)

Element = tuple[str, int]  # (key, input position)


def _elements(count: int, keys: str = "abc") -> list[Element]:
    return [(keys[i % len(keys)], i) for i in range(count)]


def _key(element: Element) -> str:
    return element[0]


async def _noop(element: Element) -> None:
    await asyncio.sleep(0)


async def _collect(offsets: AsyncIterator[int]) -> list[int]:
    return [offset async for offset in offsets]


async def _collect_until_error(offsets: AsyncIterator[int]) -> tuple[list[int], Exception]:
    """The offsets yielded before the run raised, and what it raised."""
    yielded: list[int] = []
    try:
        async for offset in offsets:
            yielded.append(offset)
    except Exception as error:  # the caller checks the type
        return yielded, error
    pytest.fail(f"no error after yielding {yielded}")


def test_every_element_is_handled_and_the_last_offset_is_yielded() -> None:
    handled: list[int] = []

    async def handler(element: Element) -> None:
        await asyncio.sleep(0)
        handled.append(element[1])

    yielded = asyncio.run(_collect(process_in_parallel(_elements(250), handler, key=_key)))
    assert sorted(handled) == list(range(250))
    assert yielded[-1] == 249
    assert yielded == sorted(set(yielded))


def test_an_async_source_and_a_start_offset() -> None:
    async def source() -> AsyncIterator[Element]:
        for element in _elements(30):
            await asyncio.sleep(0)
            yield element

    yielded = asyncio.run(
        _collect(process_in_parallel(source(), _noop, key=_key, start_offset=1000, commit_every=7))
    )
    assert yielded[-1] == 1029
    assert all(1000 <= offset <= 1029 for offset in yielded)


def test_an_empty_source_yields_nothing() -> None:
    assert asyncio.run(_collect(process_in_parallel([], _noop, key=_key))) == []


def test_different_keys_run_concurrently_up_to_parallelism() -> None:
    active = 0
    most = 0

    async def handler(element: Element) -> None:
        nonlocal active, most
        active += 1
        most = max(most, active)
        await asyncio.sleep(0.005)
        active -= 1

    elements = _elements(40, keys="abcdefgh")
    asyncio.run(_collect(process_in_parallel(elements, handler, key=_key, parallelism=4)))
    assert most == 4


def test_one_key_runs_in_input_order_one_at_a_time() -> None:
    order: list[int] = []
    active = 0

    async def handler(element: Element) -> None:
        nonlocal active
        active += 1
        assert active == 1
        order.append(element[1])
        await asyncio.sleep(0.001 * (element[1] % 3))
        active -= 1

    elements = _elements(20, keys="a")
    asyncio.run(_collect(process_in_parallel(elements, handler, key=_key, parallelism=4)))
    assert order == list(range(20))


def test_a_failure_yields_the_committable_offset_then_raises() -> None:
    handled: list[int] = []

    async def handler(element: Element) -> None:
        await asyncio.sleep(0.001)
        if element[1] == 5:
            raise RuntimeError(element)
        handled.append(element[1])

    elements = _elements(40, keys="ab")
    yielded, error = asyncio.run(
        _collect_until_error(process_in_parallel(elements, handler, key=_key, parallelism=2))
    )
    assert type(error) is ElementFailedError
    assert error.offset == 5
    assert error.committed == 4
    assert isinstance(error.cause, RuntimeError)
    assert error.__cause__ is error.cause
    assert yielded[-1] == 4
    assert not [i for i in handled if i > 5 and i % 2 == 1]  # key "b" stopped at 5
    assert set(range(5)) <= set(handled)


def test_a_hung_handler_times_out() -> None:
    async def handler(element: Element) -> None:
        await asyncio.sleep(60 if element[1] == 3 else 0)

    async def main() -> tuple[list[int], Exception, float]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        offsets = process_in_parallel(
            _elements(10), handler, key=_key, element_timeout=timedelta(milliseconds=50)
        )
        yielded, error = await _collect_until_error(offsets)
        return yielded, error, loop.time() - started

    yielded, error, took = asyncio.run(main())
    assert isinstance(error, ElementTimeoutError)
    assert isinstance(error, TimeoutError)
    assert error.offset == 3
    assert error.committed == 2
    assert "element_timeout" in str(error.cause)
    assert yielded == [2]
    assert took < 5


def test_a_timeout_error_raised_by_the_handler_is_a_plain_failure() -> None:
    async def handler(element: Element) -> None:
        raise TimeoutError(element)

    _, error = asyncio.run(
        _collect_until_error(process_in_parallel(_elements(3), handler, key=_key))
    )
    assert type(error) is ElementFailedError
    assert error.offset == 0
    assert error.committed == -1


def test_a_handler_that_cancels_itself_fails_its_element() -> None:
    async def handler(element: Element) -> None:
        if element[1] == 2:
            raise asyncio.CancelledError
        await asyncio.sleep(0)

    _, error = asyncio.run(
        _collect_until_error(process_in_parallel(_elements(6), handler, key=_key))
    )
    assert type(error) is ElementFailedError
    assert (error.offset, error.committed) == (2, 1)


def test_a_key_function_error_fails_that_element() -> None:
    def key(element: Element) -> str:
        if element[1] == 4:
            raise KeyError(element)
        return element[0]

    _, error = asyncio.run(_collect_until_error(process_in_parallel(_elements(9), _noop, key=key)))
    assert type(error) is ElementFailedError
    assert (error.offset, error.committed) == (4, 3)
    assert isinstance(error.cause, KeyError)


def test_a_source_error_is_reraised_after_the_in_flight_work() -> None:
    async def source() -> AsyncIterator[Element]:
        for element in _elements(12):
            yield element
        raise OSError(12)

    yielded, error = asyncio.run(
        _collect_until_error(process_in_parallel(source(), _noop, key=_key))
    )
    assert isinstance(error, OSError)
    assert yielded[-1] == 11


def test_a_source_that_cancels_itself_is_reraised_not_taken_for_its_end() -> None:
    """A pull that raised CancelledError on its own ended the run as if the source were done.

    Nothing was raised: a consumer of a finite stream took the truncated run for a complete
    one. The run is not being cancelled here, so it is the source's error.
    """

    async def source() -> AsyncIterator[Element]:
        for element in _elements(4):
            yield element
        pending = asyncio.get_running_loop().create_future()
        pending.cancel()  # e.g. a read that the connection's own shutdown cancelled
        await pending

    yielded: list[int] = []

    async def drain() -> None:
        async for offset in process_in_parallel(source(), _noop, key=_key):
            yielded.append(offset)

    async def main() -> None:
        with pytest.raises(asyncio.CancelledError):
            await drain()
        assert asyncio.all_tasks() == {asyncio.current_task()}

    asyncio.run(main())
    assert yielded == [3]


def test_a_source_error_before_an_element_failure_is_the_one_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The source's error, the first failure, was neither raised nor logged: the later
    element failure was raised in its place.
    """
    source_failed = asyncio.Event()

    async def source() -> AsyncIterator[Element]:
        yield ("a", 0)
        yield ("b", 1)
        source_failed.set()
        raise OSError(12)

    async def handler(element: Element) -> None:
        if element[1] == 1:
            await source_failed.wait()
            raise RuntimeError(element)

    yielded, error = asyncio.run(
        _collect_until_error(process_in_parallel(source(), handler, key=_key))
    )
    assert isinstance(error, OSError)
    assert error.args == (12,)
    assert yielded == [0]
    assert [r.levelname for r in caplog.records if "offset=1" in r.getMessage()] == ["WARNING"]


def test_a_source_error_after_an_element_failure_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The later of the two failures: the element's is raised, the source's is not lost."""
    pulling = asyncio.Event()

    async def source() -> AsyncIterator[Element]:
        yield ("a", 0)
        pulling.set()
        try:
            await asyncio.Event().wait()  # the pull that the element failure cancels
        except asyncio.CancelledError:
            raise OSError(12) from None

    async def handler(element: Element) -> None:
        await pulling.wait()
        raise RuntimeError(element)

    _, error = asyncio.run(_collect_until_error(process_in_parallel(source(), handler, key=_key)))
    assert type(error) is ElementFailedError
    assert (error.offset, error.committed) == (0, -1)
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        "the source failed while stopping: OSError(12)"
    ]


def test_backpressure_stops_pulling_at_max_in_flight() -> None:
    pulled = 0
    finished = 0
    most = 0

    def source() -> Iterator[Element]:
        nonlocal pulled, most
        for element in _elements(60, keys="abcdefghij"):
            pulled += 1
            most = max(most, pulled - finished)
            yield element

    async def handler(element: Element) -> None:
        nonlocal finished
        await asyncio.sleep(0.001)
        finished += 1

    asyncio.run(
        _collect(process_in_parallel(source(), handler, key=_key, parallelism=3, max_in_flight=7))
    )
    assert most == 7
    assert finished == 60


def test_commits_are_throttled_by_count() -> None:
    offsets = process_in_parallel(
        _elements(95), _noop, key=_key, commit_every=10, commit_interval=timedelta(hours=1)
    )
    yielded = asyncio.run(_collect(offsets))
    assert yielded[-1] == 94
    steps = [b - a for a, b in zip([-1, *yielded[:-2]], yielded[:-1], strict=True)]
    assert all(step >= 10 for step in steps)
    assert len(yielded) <= 10


def test_commits_are_throttled_by_time() -> None:
    interval = 0.02

    async def handler(element: Element) -> None:
        await asyncio.sleep(0.002)

    async def main() -> list[float]:
        loop = asyncio.get_running_loop()
        times = []
        offsets = process_in_parallel(
            _elements(60),
            handler,
            key=_key,
            parallelism=1,
            commit_every=10_000,
            commit_interval=timedelta(seconds=interval),
        )
        async for _ in offsets:
            times.append(loop.time())
        return times

    times = asyncio.run(main())
    assert len(times) >= 3  # at least two by time, plus the final one
    gaps = [b - a for a, b in itertools.pairwise(times[:-1])]
    assert all(gap >= interval * 0.9 for gap in gaps)


def test_closing_early_cancels_the_running_handlers() -> None:
    cancelled = 0
    hanging = 0
    all_hanging = asyncio.Event()

    async def handler(element: Element) -> None:
        nonlocal cancelled, hanging
        if element[1] < 3:
            return
        hanging += 1
        if hanging == 3:
            all_hanging.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled += 1
            raise

    async def main() -> int:
        offsets = process_in_parallel(
            _elements(20), handler, key=_key, commit_every=1, element_timeout=None
        )
        first = await anext(offsets)
        async with asyncio.timeout(5):
            await all_hanging.wait()
        await offsets.aclose()
        assert asyncio.all_tasks() == {asyncio.current_task()}
        return first

    assert asyncio.run(main()) >= 0
    assert cancelled == 3  # one running element per key


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("parallelism", {"parallelism": 0}),
        ("max_in_flight", {"max_in_flight": 0}),
        ("commit_every", {"commit_every": 0}),
        ("commit_interval", {"commit_interval": timedelta(0)}),
        ("element_timeout", {"element_timeout": timedelta(seconds=-1)}),
        ("parallelism", {"parallelism": "4"}),
        ("parallelism", {"parallelism": 1.5}),
        ("parallelism", {"parallelism": True}),
        ("parallelism", {"parallelism": 2**64}),
        ("max_in_flight", {"max_in_flight": None}),
        ("commit_every", {"commit_every": 2.5}),
        ("commit_interval", {"commit_interval": 1}),
        ("element_timeout", {"element_timeout": 30}),
    ],
)
def test_bad_arguments_fail_when_called(name: str, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError, match=name):
        process_in_parallel([], _noop, key=_key, **kwargs)


@pytest.mark.parametrize(
    ("name", "kwargs"), [("handler", {"handler": None}), ("key", {"key": "persistence_id"})]
)
def test_a_handler_or_key_that_is_not_callable_fails_when_called(
    name: str, kwargs: dict[str, Any]
) -> None:
    """Each element failed as if the handler had failed on it (ElementFailedError)."""
    arguments = {"handler": _noop, "key": _key} | kwargs
    with pytest.raises(ConfigurationError, match=rf"^{name} must be callable, got "):
        process_in_parallel([1], **arguments)


@pytest.mark.parametrize("source", ["abc", b"abc", None, 5])
def test_a_source_that_is_no_collection_fails_when_called(source: object) -> None:
    """A text was handled character by character; None failed at the first read."""
    with pytest.raises(InvalidInputError, match=r"^source must be a collection, got "):
        process_in_parallel(source, _noop, key=_key)  # type: ignore[arg-type]


def test_a_start_offset_whose_committed_offset_no_store_holds_is_refused_by_its_name() -> None:
    """-2**63: the offset before it, the acker's committed, is below 64 bits, and the error
    named `committed`, which the caller never passed."""
    with pytest.raises(InvalidInputError, match=r"^start_offset must be an integer >= -\d+"):
        process_in_parallel([], _noop, key=_key, start_offset=-(2**63))


@pytest.mark.parametrize("start_offset", ["3", 1.5, True, None])
def test_a_start_offset_is_refused_as_an_acked_offset_is(start_offset: object) -> None:
    """An offset, not a setting: InvalidInputError, as the acker's `committed` and acks."""
    with pytest.raises(InvalidInputError, match=r"^start_offset must be an integer, got "):
        process_in_parallel([], _noop, key=_key, start_offset=start_offset)  # type: ignore[arg-type]


def test_a_parallelism_above_max_in_flight_starts_only_as_many_workers() -> None:
    """The others could never get an element, and a parallelism of 2**40 hung creating them."""
    workers: list[int] = []

    async def handler(element: Element) -> None:
        names = [task.get_name() for task in asyncio.all_tasks()]
        workers.append(sum(name.startswith("ordo-acking-worker-") for name in names))

    async def main() -> list[int]:
        offsets = process_in_parallel(
            _elements(5), handler, key=_key, parallelism=1000, max_in_flight=2
        )
        return await _collect(offsets)

    assert asyncio.run(asyncio.wait_for(main(), timeout=10))[-1] == 4
    assert set(workers) == {2}


def test_awaitables_other_than_coroutines_are_accepted() -> None:
    def handler(element: Element) -> Awaitable[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future

    assert asyncio.run(_collect(process_in_parallel(_elements(5), handler, key=_key)))[-1] == 4


class _Abort(BaseException):
    """Not an Exception: no element failure, it ends the run."""


def test_a_base_exception_from_a_handler_ends_the_run_instead_of_hanging() -> None:
    async def handler(element: Element) -> None:
        await asyncio.sleep(0)
        if element[1] == 2:
            raise _Abort

    async def main() -> None:
        with pytest.raises(_Abort):
            await _collect(process_in_parallel(_elements(10), handler, key=_key))
        assert asyncio.all_tasks() == {asyncio.current_task()}

    asyncio.run(main())


def test_an_element_beyond_the_largest_offset_fails_before_its_handler_runs() -> None:
    """Elements at 2**63 and later were handled, then their ack crashed the run.

    The crash was a bare InvalidInputError, and 2**63 - 1, committable, was never yielded.
    """
    handled: list[Element] = []

    async def handler(element: Element) -> None:
        handled.append(element)

    offsets = process_in_parallel(_elements(5), handler, key=_key, start_offset=2**63 - 2)
    yielded, error = asyncio.run(_collect_until_error(offsets))
    assert handled == _elements(2)
    assert yielded == [2**63 - 1]
    assert isinstance(error, ElementFailedError)
    assert (error.offset, error.committed) == (2**63, 2**63 - 1)
    assert isinstance(error.cause, InvalidInputError)


def test_closing_ends_a_worker_whose_handler_swallows_the_cancel() -> None:
    """The worker went on to its key's next elements and waited for more: aclose hung."""
    handled: list[int] = []
    running = asyncio.Event()

    async def handler(element: Element) -> None:
        if handled:
            handled.append(element[1])
            return
        handled.append(element[1])
        running.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            return  # swallowed, against asyncio's rules

    async def main() -> None:
        offsets = process_in_parallel(
            _elements(5, keys="a"), handler, key=_key, commit_every=1, element_timeout=None
        )
        first = asyncio.ensure_future(anext(offsets))
        await running.wait()
        first.cancel()
        async with asyncio.timeout(5):  # a guard: on failure the close never ends
            await asyncio.gather(first, return_exceptions=True)
            await offsets.aclose()
        assert asyncio.all_tasks() == {asyncio.current_task()}

    asyncio.run(main())
    assert handled == [0]


@pytest.mark.parametrize("stop", ["element-failure", "aclose"])
@pytest.mark.parametrize("kind", ["async", "sync"])
def test_a_generator_source_is_closed_when_the_run_stops_early(stop: str, kind: str) -> None:
    """The source was left suspended: its `finally` (a connection's close, a slot's release)
    ran only once the caller dropped it or the loop shut down, so a run restarted from the
    committed offset found what the stopped source held still held."""
    closed: list[bool] = []

    async def async_source() -> AsyncIterator[Element]:
        for element in sync_source():
            yield element

    def sync_source() -> Iterator[Element]:
        try:
            for n in itertools.count():
                yield ("a", n)
        finally:
            closed.append(True)

    async def handler(element: Element) -> None:
        await asyncio.sleep(0)
        if stop == "element-failure" and element[1] == 2:
            raise ValueError(element)

    async def main() -> list[bool]:
        elements = async_source() if kind == "async" else sync_source()  # held, as by a caller
        offsets = process_in_parallel(elements, handler, key=_key, max_in_flight=1, commit_every=1)
        if stop == "element-failure":
            yielded, error = await _collect_until_error(offsets)
            assert (yielded, type(error)) == ([0, 1], ElementFailedError)
        else:
            assert await anext(offsets) == 0
            await offsets.aclose()
        return list(closed)

    assert asyncio.run(main()) == [True]
