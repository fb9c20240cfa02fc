"""The verdict: what each query chain delivered, against every tagged event of the journal."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from enum import StrEnum

from ordo.journal.ports import JournalStore
from ordo.query.forgetting import cleanup_window
from ordo.settings import QuerySettings
from ordo.simulation.readers import QueryChain
from ordo.simulation.writer_log import Range, visible_ns
from ordo.time import BucketSize, TimeUUID
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
    alike_offset_keys: tuple[bytes, ...] = ()
    """The offsets of later journal events given this one's (tag, persistence id, tag pid
    sequence nr): a delivery of the number at one of them is still a journal event's."""

    @property
    def numbered_alike(self) -> int:
        """Later journal events given this one's number: lost whatever a query delivers (G1).

        A query delivers one event per number and drops the others as duplicates. Counted here
        because expectations are keyed by number: each such event used to replace the one
        before, and the delivery of one counted for all.
        """
        return len(self.alike_offset_keys)

    def is_at(self, offset_key: bytes) -> bool:
        """Whether a delivery at `offset_key` is this event (or one numbered alike)."""
        return offset_key == self.offset_key or offset_key in self.alike_offset_keys


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """Violations of G1-G3 (all zero on success) and delivery latency."""

    expected: int
    """The tagged events each chain must deliver, summed over the chains."""
    delivered: int
    lost: int
    """Tagged events that no run of a chain of their tag delivered and that the seeds promise
    (an event numbered as another of its persistence id is one: see Expected.numbered_alike).
    Each chain is a consumer of its own: what another chain of the tag delivered was judged
    for all of them, so `--queries` beyond the tags hid a loss."""
    excused: Mapping[str, int]
    """Undelivered events the seeds warn about, per LossCause (not violations)."""
    duplicated: int
    """Deliveries of an event a run had delivered already, or that a later run may not repeat
    because its offset is not after the run's start (G1, G3)."""
    misordered: int
    """Deliveries out of tag pid sequence nr order within a run (G1)."""
    not_in_journal: int
    """Deliveries of no journal event: a number the journal did not give the persistence id
    for the tag, or an offset other than the event's (a consumer would resume from it). They
    were counted nowhere. The simulation deletes no events, so every delivery must be one."""
    failed_queries: int
    """Chains that ended with MissingTaggedEventError: the seeds' loud failure."""
    latency_ms: Mapping[str, float]

    @property
    def violations(self) -> int:
        """Everything that breaks G1-G3."""
        return (
            self.lost
            + self.duplicated
            + self.misordered
            + self.not_in_journal
            + self.failed_queries
        )


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
            offset_key = event.timeuuid.to_bytes()
            for tag, nr in event.tags.items():
                earlier = expected.get((tag, pid, nr))
                expected[(tag, pid, nr)] = (
                    Expected(
                        sequence_nr=event.sequence_nr,
                        offset_key=offset_key,
                        offset_ns=event.timeuuid.epoch_ns,
                        appended_ns=appended,
                    )
                    if earlier is None
                    else replace(
                        earlier, alike_offset_keys=(*earlier.alike_offset_keys, offset_key)
                    )
                )
    return expected


class LossCause(StrEnum):
    """Why an undelivered event is one the seeds do not promise (not a violation)."""

    RESTART = "restart"
    """Seed 000: delayed beyond the consistency delay, offset before a restart's offset; the
    restarted run does not back-track before its start."""
    FIRST_ENCOUNTER = "first_encounter"
    """Seed 001: delayed beyond the consistency delay, and a later event of its persistence id
    was the first the run saw of it, so the run took that one as the first: a run from an
    offset, or from the first time bucket once it may have forgotten ids (see _RunsOf)."""
    BEYOND_BACK_TRACK = "beyond_back_track"
    """Delayed longer than the consistency delay plus the back-track period."""


def check(
    expected: Mapping[EventKey, Expected],
    chains: Sequence[QueryChain],
    *,
    visibility: Mapping[tuple[str, str], list[Range]],
    settings: QuerySettings,
    bucket_size: BucketSize,
) -> Verdict:
    """Judge each chain against every tagged event of its tag (only tags some chain reads count).

    `bucket_size`: the journal's, which sets how soon a query forgets ids by default.
    """
    cleanup_ns = nanoseconds(cleanup_window(settings, bucket_size))
    runs = [_RunsOf(chain, expected, settings=settings, cleanup_ns=cleanup_ns) for chain in chains]
    of_tag: dict[str, list[tuple[EventKey, Expected]]] = {}
    for key, event in expected.items():
        of_tag.setdefault(key[0], []).append((key, event))
    excused: Counter[LossCause] = Counter()
    lost = total = 0
    for judged in runs:
        events = of_tag.get(judged.chain.tag, [])
        total += sum(1 + event.numbered_alike for _, event in events)
        lost += sum(event.numbered_alike for _, event in events)
        for cause in _excuses_of_the_undelivered(judged, events, visibility, settings):
            if cause is None:
                lost += 1
            else:
                excused[cause] += 1
    return Verdict(
        expected=total,
        delivered=sum(len(r.chain.deliveries) for r in runs),
        lost=lost,
        excused={cause.value: excused[cause] for cause in LossCause},
        duplicated=sum(r.duplicated for r in runs),
        misordered=sum(r.misordered for r in runs),
        not_in_journal=sum(r.not_in_journal for r in runs),
        failed_queries=sum(1 for r in runs if r.chain.error is not None),
        latency_ms=_percentiles([latency for r in runs for latency in r.latencies_ms]),
    )


_NEVER_DELIVERED = (LossCause.RESTART, LossCause.FIRST_ENCOUNTER)
"""Excuses of an event that a run of the chain passed by for good: it started after the
event's offset, or took a later event of the persistence id as the id's first."""


def has_nothing_left_to_wait_for(
    chains: Sequence[QueryChain],
    expected: Mapping[EventKey, Expected],
    visibility: Mapping[tuple[str, str], list[Range]],
    *,
    settings: QuerySettings,
    bucket_size: BucketSize,
) -> bool:
    """Whether every chain has failed, or delivered each event of its tag it may still deliver.

    The run's wait for the queries (`ordo.simulation.run`) asks this while they run (a chain's
    lists only grow, so a look at them is a consistent prefix); the arguments are `check`'s.
    An event a chain's runs passed by for good (`_NEVER_DELIVERED`: a restart after its offset,
    a later event taken as its id's first) is not waited for: the seeds allow its loss, and the
    run waited its whole patience (seconds) for it, nearly every run that restarted its
    queries. An event delayed beyond the back-track is waited for, as a run may still find it
    in a gap search or fail on it.
    """
    per_tag = Counter(tag for tag, _, _ in expected)
    cleanup_ns = nanoseconds(cleanup_window(settings, bucket_size))
    for chain in chains:
        if chain.error is not None or len(chain.distinct) >= per_tag[chain.tag]:
            continue
        judged = _RunsOf(chain, expected, settings=settings, cleanup_ns=cleanup_ns)
        events = [(key, event) for key, event in expected.items() if key[0] == chain.tag]
        causes = _excuses_of_the_undelivered(judged, events, visibility, settings)
        if any(cause not in _NEVER_DELIVERED for cause in causes):
            return False
    return True


def _excuses_of_the_undelivered(
    judged: _RunsOf,
    events: Iterable[tuple[EventKey, Expected]],
    visibility: Mapping[tuple[str, str], list[Range]],
    settings: QuerySettings,
) -> Iterator[LossCause | None]:
    """The excuse of each of `events` that `judged` did not deliver (None: no excuse, a loss)."""
    for key, event in events:
        if key[1:] not in judged.seen:
            seen_at = visible_ns(visibility.get((key[0], key[1]), []), event.sequence_nr)
            yield _excuse(key, event, seen_at, judged, settings)


class _RunsOf:
    """One chain's deliveries, judged run by run."""

    def __init__(
        self,
        chain: QueryChain,
        expected: Mapping[EventKey, Expected],
        *,
        settings: QuerySettings,
        cleanup_ns: int,
    ) -> None:
        self.chain = chain
        self.seen: set[tuple[str, int]] = set()
        self.first_nr: dict[tuple[int, str], int] = {}
        """(run, persistence id) -> the first tag pid sequence nr that run delivered, where
        the run may have taken it as the id's first without looking for earlier ones."""
        self.duplicated = self.misordered = self.not_in_journal = 0
        self.latencies_ms: list[float] = []
        run_seen: set[tuple[str, int]] = set()
        last_nr: dict[str, int] = {}
        forgetting = _Forgetting(settings, cleanup_ns)
        current_run = -1
        for d in chain.deliveries:
            if d.run != current_run:
                current_run, run_seen, last_nr = d.run, set(), {}
                forgetting = _Forgetting(settings, cleanup_ns)
            key = (d.persistence_id, d.tag_pid_sequence_nr)
            start = chain.starts[d.run]
            if key in run_seen or (
                key in self.seen and start is not None and d.offset_key <= start
            ):
                self.duplicated += 1
            previous = last_nr.get(d.persistence_id)
            if previous is None:
                if start is not None or forgetting.may_have_forgotten(d.delivered_ns):
                    self.first_nr[(d.run, d.persistence_id)] = d.tag_pid_sequence_nr
            elif d.tag_pid_sequence_nr != previous + 1:
                self.misordered += 1
            last_nr[d.persistence_id] = d.tag_pid_sequence_nr
            forgetting.delivered(d.offset_key)
            event = expected.get((chain.tag, *key))
            if event is None or not event.is_at(d.offset_key):
                self.not_in_journal += 1
            elif key not in self.seen and event.appended_ns is not None:
                self.latencies_ms.append((d.delivered_ns - event.appended_ns) / 1e6)
            run_seen.add(key)
            self.seen.add(key)

    @property
    def restarts(self) -> list[bytes]:
        """The offsets the restarted runs started after."""
        return [start for start in self.chain.starts[1:] if start is not None]


class _Forgetting:
    """When one run from the first time bucket may have forgotten ids (ordo.query.forgetting).

    Such a run expects every persistence id to start at tag pid sequence nr 1 and searches
    for a missing first event, then fails, rather than skip it; only once it has forgotten an
    id does it take a first event above 1 as the first. It forgets ids whose last event lies
    the cleanup window behind its position, which stays the consistency delay behind now: not
    before a delivery that long after the lowest offset the run delivered.
    """

    def __init__(self, settings: QuerySettings, cleanup_ns: int) -> None:
        self._window_ns = nanoseconds(settings.eventual_consistency_delay) + cleanup_ns
        self._lowest_ns: int | None = None

    def delivered(self, offset_key: bytes) -> None:
        """Note a delivery of the run."""
        offset_ns = TimeUUID.from_bytes(offset_key).epoch_ns
        if self._lowest_ns is None or offset_ns < self._lowest_ns:
            self._lowest_ns = offset_ns

    def may_have_forgotten(self, delivered_ns: int) -> bool:
        """Whether the run may have forgotten an id before a delivery at `delivered_ns`."""
        return self._lowest_ns is not None and self._lowest_ns + self._window_ns <= delivered_ns


def _excuse(
    key: EventKey,
    event: Expected,
    seen_at: int | None,
    judged: _RunsOf,
    settings: QuerySettings,
) -> LossCause | None:
    """Why the seeds allow `judged` to miss this event, or None when missing it is a violation."""
    delay_ns = nanoseconds(settings.eventual_consistency_delay)
    if seen_at is None or seen_at <= event.offset_ns + delay_ns:
        return None
    if any(start >= event.offset_key for start in judged.restarts):
        return LossCause.RESTART
    pid, nr = key[1], key[2]
    if any(first > nr for (_, p), first in judged.first_nr.items() if p == pid):
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
