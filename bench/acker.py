"""Ack throughput and peak memory of ContiguousAcker against seed 004's heap-based acker.

    .venv/bin/python bench/acker.py [--quick] [--repeat N] [--window W]

Workload: completions of N dense offsets in a random order within a window of W = 1000 (like a
consumer with 1000 elements in flight), generated up front with a fixed seed and fed to both
ackers, in the same process and run, in two shapes:
- sliding: offset i completes at time i + uniform(0, W), so no element finishes more than W
  positions from its place;
- blocks: each block of W consecutive offsets completes in a shuffled order, one block after
  the other (the heap then holds up to a whole block).

What is measured:
- acks/s: wall clock of `for offset in order: acker.ack(offset)`, the best of --repeat runs,
  the two ackers alternating so that they share the machine's noise.
- peak memory: tracemalloc's peak over a separate run (tracing slows the loop, so it is not
  timed), including the acker object itself. The heap stores references to the order's
  existing int objects and ContiguousAcker one byte per slot of its ring, so the figure is the
  structure, not the offsets.
- largest pending: the most runs of done offsets above committed (ContiguousAcker) and heap
  entries (heap) at any point, from a third, untimed run: the heap's memory is proportional to
  its entries; the acker's to how far completions run ahead (its ring), not to this.

The heap acker is the seed's approach: push every completed offset on a heap, pop while the
top is committed + 1. Like the seed it assumes offsets are unique (the bench has no duplicates).

Target (the issue's): ContiguousAcker at least as fast as the heap and with a peak memory no
larger than the heap's, at the largest N, for each shape. A benchmark reports; it exits 0
either way.
"""

from __future__ import annotations

import argparse
import heapq
import random
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from _args import positive_count
from _report import Row, machine_lines, print_table, ratio_row
from ordo.acking import ContiguousAcker

DEFAULT_SIZES = (1_000_000, 100_000)
QUICK_SIZES = (100_000, 10_000)
WINDOW = 1000
SEED = 4


class Acker(Protocol):
    @property
    def committed(self) -> int: ...

    def ack(self, offset: int) -> int: ...


class HeapAcker:
    """Seed 004's priority queue: every completed offset on a heap until it is committable."""

    __slots__ = ("_committed", "_heap")

    def __init__(self, *, committed: int = -1) -> None:
        self._committed = committed
        self._heap: list[int] = []

    @property
    def committed(self) -> int:
        return self._committed

    @property
    def pending(self) -> int:
        return len(self._heap)

    def ack(self, offset: int) -> int:
        committed = self._committed
        if offset <= committed:
            return committed
        heap = self._heap
        heapq.heappush(heap, offset)
        while heap and heap[0] == committed + 1:
            committed = heapq.heappop(heap)
        self._committed = committed
        return committed


@dataclass(frozen=True, slots=True)
class Result:
    acks_per_s: float
    peak_bytes: int
    largest_pending: int


def sliding_order(count: int, window: int, seed: int) -> list[int]:
    """0..count-1 in the order they complete: offset i at time i + uniform(0, window)."""
    rng = random.Random(seed)
    return sorted(range(count), key=lambda offset: offset + rng.random() * window)


def block_order(count: int, window: int, seed: int) -> list[int]:
    """0..count-1, each block of `window` offsets shuffled, the blocks in order."""
    rng = random.Random(seed)
    order: list[int] = []
    for start in range(0, count, window):
        block = list(range(start, min(count, start + window)))
        rng.shuffle(block)
        order += block
    return order


ORDERS: dict[str, Callable[[int, int, int], list[int]]] = {
    "sliding": sliding_order,
    "blocks": block_order,
}


def time_acks(make: Callable[[], Acker], order: Sequence[int]) -> float:
    acker = make()
    ack = acker.ack
    started = time.perf_counter()
    for offset in order:
        ack(offset)
    elapsed = time.perf_counter() - started
    assert acker.committed == len(order) - 1
    return len(order) / elapsed


def peak_memory(make: Callable[[], Acker], order: Sequence[int]) -> int:
    tracemalloc.start()
    try:
        acker = make()
        ack = acker.ack
        for offset in order:
            ack(offset)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert acker.committed == len(order) - 1
    return peak


def largest_pending(make: Callable[[], Acker], order: Sequence[int]) -> int:
    acker = make()
    largest = 0
    if isinstance(acker, ContiguousAcker):
        for offset in order:
            acker.ack(offset)
            largest = max(largest, acker.pending_intervals)
    elif isinstance(acker, HeapAcker):
        for offset in order:
            acker.ack(offset)
            largest = max(largest, acker.pending)
    return largest


ACKERS: dict[str, Callable[[], Acker]] = {
    "ContiguousAcker": ContiguousAcker,
    "heap acker (seed 004)": HeapAcker,
}
PENDING_UNIT = {"ContiguousAcker": "intervals", "heap acker (seed 004)": "heap entries"}


def bench_order(order: Sequence[int], *, repeat: int) -> dict[str, Result]:
    speeds: dict[str, float] = dict.fromkeys(ACKERS, 0.0)
    for _ in range(repeat):
        for name, make in ACKERS.items():
            speeds[name] = max(speeds[name], time_acks(make, order))
    return {
        name: Result(
            acks_per_s=speeds[name],
            peak_bytes=peak_memory(make, order),
            largest_pending=largest_pending(make, order),
        )
        for name, make in ACKERS.items()
    }


def rows_for(label: str, results: dict[str, Result]) -> list[Row]:
    rows = []
    for name, result in results.items():
        rows.append(Row(f"{label}, {name}: speed", f"{result.acks_per_s:,.0f}", "acks/s"))
        rows.append(Row(f"{label}, {name}: peak memory", f"{result.peak_bytes:,}", "bytes"))
        rows.append(
            Row(
                f"{label}, {name}: largest pending",
                f"{result.largest_pending:,}",
                PENDING_UNIT[name],
            )
        )
    return rows


def verdict_rows(label: str, results: dict[str, Result]) -> list[Row]:
    ours, heap = results["ContiguousAcker"], results["heap acker (seed 004)"]
    speed = ours.acks_per_s / heap.acks_per_s
    memory = ours.peak_bytes / heap.peak_bytes
    is_pass = speed >= 1.0 and memory <= 1.0
    return [
        ratio_row(f"{label}: ContiguousAcker / heap, speed", speed, target=1.0),
        ratio_row(
            f"{label}: ContiguousAcker / heap, peak memory", memory, target=1.0, at_least=False
        ),
        Row(f"{label}: target met", "PASS" if is_pass else "MISS", "as fast, no more memory"),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument(
        "--repeat", type=positive_count, default=None, help="timed runs; the best counts"
    )
    parser.add_argument("--window", type=positive_count, default=WINDOW, help="completion window")
    args = parser.parse_args(argv)
    sizes = QUICK_SIZES if args.quick else DEFAULT_SIZES
    repeat = args.repeat or (1 if args.quick else 3)
    started = time.perf_counter()
    print("\n".join(machine_lines()))
    print(
        f"workload:   {' and '.join(f'{n:,}' for n in sizes)} completions within a window of "
        f"{args.window} (sliding: i completes at i + uniform(0, {args.window}); blocks: "
        f"each block of {args.window} shuffled); best of {repeat} timed runs"
    )
    print(flush=True)
    rows: list[Row] = []
    verdicts: list[Row] = []
    for shape, make_order in ORDERS.items():
        for count in sizes:
            label = f"{shape} {count:,}"
            results = bench_order(make_order(count, args.window, SEED), repeat=repeat)
            rows.extend(rows_for(label, results))
            if count == max(sizes):
                verdicts.extend(verdict_rows(label, results))
    print_table(rows + verdicts, unit_rule=24)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
