"""The verdict: what each query chain delivered, against every tagged event of the journal."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from enum import StrEnum

from ordo.journal.ports import JournalStore
from ordo.settings import QuerySettings
from ordo.simulation.readers import QueryChain
from ordo.simulation.writer_log import Range, visible_ns
from ordo.time.duration import nanoseconds
from ordo.types import SequenceNr

EventKey = tuple[str, str, int]
"""(tag, persistence id, tag pid sequence nr)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Expected:
    """A tagged journal event: its offset and when it was really appended, if logged."""

    sequence_nr: int
    offset_key: bytes
    offset_ns: int
    appended_ns: int | None
    numbered_alike: int = 0
    """Later journal events given this one's (tag, persistence id, tag pid sequence nr): a
    query delivers one event per number and drops the others as duplicates, so they are lost
    whatever it delivers (G1). Counted here because expectations are keyed by number: each
    such event used to replace the one before, and the delivery of one counted for all."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """Violations of G1-G3 (all zero on success) and delivery latency."""

    expected: int
    delivered: int
    lost: int
    """Tagged events that no run of their tag's chain delivered and that the seeds promise
    (an event numbered as another of its persistence id is one: see Expected.numbered_alike)."""
    excused: Mapping[str, int]
    """Undelivered events the seeds warn about, per LossCause (not violations)."""
    duplicated: int
    """Deliveries of an event a run had delivered already, or that a later run may not repeat
    because its offset is not after the run's start (G1, G3)."""
    misordered: int
    """Deliveries out of tag pid sequence nr order within a run (G1)."""
    failed_queries: int
    """Chains that ended with MissingTaggedEventError: the seeds' loud failure."""
    latency_ms: Mapping[str, float]

    @property
    def violations(self) -> int:
        """Everything that breaks G1-G3."""
        return self.lost + self.duplicated + self.misordered + self.failed_queries


def expected_events(
    journal: JournalStore, appended_ns: Mapping[tuple[str, int], int]
) -> dict[EventKey, Expected]:
    """Every tagged event of the journal, keyed by (tag, persistence id, tag pid nr).

    `appended_ns`: when the writers appended each (persistence id, sequence nr), as logged.
    """
    expected: dict[EventKey, Expected] = {}
    for pid in journal.persistence_ids():
        highest = journal.highest_sequence_nr(pid)
        for event in journal.read_events(
            pid, from_sequence_nr=SequenceNr(1), to_sequence_nr=highest
        ):
            appended = appended_ns.get((pid, event.sequence_nr))
            for tag, nr in event.tags.items():
                earlier = expected.get((tag, pid, nr))
                expected[(tag, pid, nr)] = (
                    Expected(
                        sequence_nr=event.sequence_nr,
                        offset_key=event.timeuuid.to_bytes(),
                        offset_ns=event.timeuuid.epoch_ns,
                        appended_ns=appended,
                    )
                    if earlier is None
                    else replace(earlier, numbered_alike=earlier.numbered_alike + 1)
                )
    return expected


class LossCause(StrEnum):
    """Why an undelivered event is one the seeds do not promise (not a violation)."""

    RESTART = "restart"
    """Seed 000: delayed beyond the consistency delay, offset before a restart's offset; the
    restarted run does not back-track before its start."""
    FIRST_ENCOUNTER = "first_encounter"
    """Seed 001: delayed beyond the consistency delay, and a later event of its persistence id
    was the first the run saw of it, so the run took that one as the first."""
    BEYOND_BACK_TRACK = "beyond_back_track"
    """Delayed longer than the consistency delay plus the back-track period."""


def check(
    expected: Mapping[EventKey, Expected],
    chains: Sequence[QueryChain],
    *,
    visibility: Mapping[tuple[str, str], list[Range]],
    settings: QuerySettings,
) -> Verdict:
    """Judge the chains (only tags some chain reads count)."""
    runs = [_RunsOf(chain, expected) for chain in chains]
    delivered: dict[str, set[tuple[str, int]]] = {}
    for judged in runs:
        delivered.setdefault(judged.chain.tag, set()).update(judged.seen)
    excused: Counter[LossCause] = Counter()
    lost = 0
    for key, event in expected.items():
        if key[0] not in delivered:
            continue
        lost += event.numbered_alike
        if key[1:] in delivered[key[0]]:
            continue
        seen_at = visible_ns(visibility.get((key[0], key[1]), []), event.sequence_nr)
        cause = _excuse(key, event, seen_at, [r for r in runs if r.chain.tag == key[0]], settings)
        if cause is None:
            lost += 1
        else:
            excused[cause] += 1
    return Verdict(
        expected=sum(
            1 + event.numbered_alike for key, event in expected.items() if key[0] in delivered
        ),
        delivered=sum(len(r.chain.deliveries) for r in runs),
        lost=lost,
        excused={cause.value: excused[cause] for cause in LossCause},
        duplicated=sum(r.duplicated for r in runs),
        misordered=sum(r.misordered for r in runs),
        failed_queries=sum(1 for r in runs if r.chain.error is not None),
        latency_ms=_percentiles([latency for r in runs for latency in r.latencies_ms]),
    )


class _RunsOf:
    """One chain's deliveries, judged run by run."""

    def __init__(self, chain: QueryChain, expected: Mapping[EventKey, Expected]) -> None:
        self.chain = chain
        self.seen: set[tuple[str, int]] = set()
        self.first_nr: dict[tuple[int, str], int] = {}
        """(run, persistence id) -> the first tag pid sequence nr that run delivered."""
        self.duplicated = self.misordered = 0
        self.latencies_ms: list[float] = []
        run_seen: set[tuple[str, int]] = set()
        last_nr: dict[str, int] = {}
        current_run = -1
        for d in chain.deliveries:
            if d.run != current_run:
                current_run, run_seen, last_nr = d.run, set(), {}
            key = (d.persistence_id, d.tag_pid_sequence_nr)
            start = chain.starts[d.run]
            if key in run_seen or (
                key in self.seen and start is not None and d.offset_key <= start
            ):
                self.duplicated += 1
            previous = last_nr.get(d.persistence_id)
            if previous is None:
                self.first_nr[(d.run, d.persistence_id)] = d.tag_pid_sequence_nr
            elif d.tag_pid_sequence_nr != previous + 1:
                self.misordered += 1
            last_nr[d.persistence_id] = d.tag_pid_sequence_nr
            event = expected.get((chain.tag, *key))
            if key not in self.seen and event is not None and event.appended_ns is not None:
                self.latencies_ms.append((d.delivered_ns - event.appended_ns) / 1e6)
            run_seen.add(key)
            self.seen.add(key)

    @property
    def restarts(self) -> list[bytes]:
        """The offsets the restarted runs started after."""
        return [start for start in self.chain.starts[1:] if start is not None]


def _excuse(
    key: EventKey,
    event: Expected,
    seen_at: int | None,
    runs: list[_RunsOf],
    settings: QuerySettings,
) -> LossCause | None:
    """Why the seeds allow this event to be missed, or None when missing it is a violation."""
    delay_ns = nanoseconds(settings.eventual_consistency_delay)
    if seen_at is None or seen_at <= event.offset_ns + delay_ns:
        return None
    if any(start >= event.offset_key for r in runs for start in r.restarts):
        return LossCause.RESTART
    pid, nr = key[1], key[2]
    if any(first > nr for r in runs for (_, p), first in r.first_nr.items() if p == pid):
        return LossCause.FIRST_ENCOUNTER
    period = settings.back_track_period
    if isinstance(period, timedelta) and seen_at > event.offset_ns + delay_ns + nanoseconds(period):
        return LossCause.BEYOND_BACK_TRACK
    return None


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"min": 0.0, "p50": 0.0, "p90": 0.0, "p99": 0.0, "max": 0.0}
    ordered = sorted(values)

    def at(fraction: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))], 1)

    return {
        "min": round(ordered[0], 1),
        "p50": at(0.50),
        "p90": at(0.90),
        "p99": at(0.99),
        "max": round(ordered[-1], 1),
    }
