"""`ordo simulate`: writers, live queries and the checker, wired together for one run."""

from __future__ import annotations

import random
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from ordo.errors import ConfigurationError
from ordo.journal import check_bucket_size
from ordo.settings import EventsByTagSettings, QuerySettings
from ordo.settings.loading import LONGEST_MS
from ordo.simulation.checker import (
    EventKey,
    Expected,
    Verdict,
    check,
    expected_events,
    has_nothing_left_to_wait_for,
)
from ordo.simulation.readers import QueryChain, QueryChainThread
from ordo.simulation.workload import TAGS, Workload
from ordo.simulation.writer_log import Range, read_writer_logs
from ordo.simulation.writers import WriterPlan, run_writers
from ordo.storage.open import require_empty_journal, stores_at
from ordo.time import BucketSize, format_first_time_bucket

SIMULATION_QUERY_SETTINGS = QuerySettings(
    eventual_consistency_delay=timedelta(seconds=1),
    refresh_interval=timedelta(milliseconds=500),
)
"""Live queries a little quicker than the seeds' defaults, so that a run takes seconds."""

MAX_SKEW_MS = 3_600_000
"""The largest clock skew a writer may be given: an hour. The queries start that far before
now, to read what a clock behind writes, and the run waits that long after the writers for
them to reach what a clock ahead wrote: a run with far larger skews would not end. Skews beyond
the TimeUUID range failed every writer with a traceback each."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulationConfig:
    """Every knob of a run; the seed makes the workload, skews and delays repeatable."""

    journal: str
    writers: int = 4
    events: int = 20_000
    persistence_ids: int = 2_000
    seed: int = 1
    skew_ms: int = 300
    max_delay_ms: int = 2_000
    delay_probability: float = 0.05
    handovers: float = 0.02
    """Share of appends to an id another writer owns: ids change writers (and clocks)."""
    events_per_s: float = 4_000.0
    queries: int = len(TAGS)
    """Query chains, one per tag round-robin."""
    restarts: int = 3
    """Restarts of each chain from its last delivered offset, at random moments."""
    bucket_size: BucketSize = BucketSize.MINUTE
    query: QuerySettings = SIMULATION_QUERY_SETTINGS
    pubsub: bool = False
    flush_interval: timedelta = timedelta(milliseconds=25)

    def __post_init__(self) -> None:
        for name in ("writers", "events", "persistence_ids", "queries"):
            if getattr(self, name) < 1:
                msg = f"{name} must be >= 1, got {getattr(self, name)}"
                raise ConfigurationError(msg)
        for name in ("skew_ms", "max_delay_ms", "restarts"):
            if getattr(self, name) < 0:
                msg = f"{name} must be >= 0, got {getattr(self, name)}"
                raise ConfigurationError(msg)
        if self.skew_ms > MAX_SKEW_MS:
            msg = f"skew_ms must be at most {MAX_SKEW_MS} (an hour), got {self.skew_ms}"
            raise ConfigurationError(msg)
        if self.max_delay_ms > LONGEST_MS:  # the delayed writes' wait would overflow
            msg = f"max_delay_ms must be at most {LONGEST_MS} (100 years), got {self.max_delay_ms}"
            raise ConfigurationError(msg)
        for name in ("delay_probability", "handovers"):
            if not 0 <= getattr(self, name) <= 1:
                msg = f"{name} must be within [0, 1], got {getattr(self, name)}"
                raise ConfigurationError(msg)
        if self.events_per_s <= 0:
            msg = f"events_per_s must be > 0, got {self.events_per_s}"
            raise ConfigurationError(msg)


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulationReport:
    """What a run wrote and what the checker found."""

    config: SimulationConfig
    events: int
    write_seconds: float
    conflicts: int
    verdict: Verdict
    restarts: int

    def to_json_dict(self) -> dict[str, object]:
        """The report as one JSON object (`ordo simulate --json`)."""
        v = self.verdict
        return {
            "events": self.events,
            "tagged_events": v.expected,
            "delivered": v.delivered,
            "lost": v.lost,
            "lost_as_the_seeds_allow": dict(v.excused),
            "duplicated": v.duplicated,
            "misordered": v.misordered,
            "not_in_journal": v.not_in_journal,
            "failed_queries": v.failed_queries,
            "violations": v.violations,
            "latency_ms": dict(v.latency_ms),
            "restarts": self.restarts,
            "writers": self.config.writers,
            "conflicts": self.conflicts,
            "seed": self.config.seed,
            "events_per_s": round(self.events / self.write_seconds) if self.write_seconds else 0,
        }


Progress = Callable[[str, int, int], None]
"""on_progress(phase, done, total): phases "write" (events) and "deliver" (events)."""


def simulate(config: SimulationConfig, *, on_progress: Progress) -> SimulationReport:
    """Run writers and live queries together, then check what the queries delivered."""
    with tempfile.TemporaryDirectory(prefix="ordo-simulation-") as logs:
        return _simulate(config, Path(logs), on_progress=on_progress)


def _simulate(config: SimulationConfig, logs: Path, *, on_progress: Progress) -> SimulationReport:
    require_empty_journal(config.journal, run="a simulation")  # before creating anything
    with stores_at(config.journal) as stores:  # a journal that cannot be used fails here, once,
        recorded = stores.journal.recorded_bucket_size()  # not in every query thread and writer
        check_bucket_size(recorded, config.bucket_size)
    events_by_tag = EventsByTagSettings(
        bucket_size=config.bucket_size,
        first_time_bucket=format_first_time_bucket(  # before what a clock behind writes
            time.time_ns() // 1_000_000 - config.skew_ms - 2 * config.bucket_size.millis
        ),
        flush_interval=config.flush_interval,
        pubsub_notification=config.pubsub,
    )
    plan = WriterPlan(
        url=config.journal,
        workload=Workload(
            events=config.events,
            persistence_ids=config.persistence_ids,
            writers=config.writers,
            seed=config.seed,
            handovers=config.handovers,
        ),
        settings=events_by_tag,
        skew_ms=config.skew_ms,
        max_delay_ms=config.max_delay_ms,
        delay_probability=config.delay_probability,
        events_per_s=config.events_per_s,
        log_dir=str(logs),
    )
    rng = random.Random(config.seed)
    chains = [QueryChain(tag=TAGS[i % len(TAGS)]) for i in range(config.queries)]
    threads = [
        QueryChainThread(
            config.journal,
            chain,
            settings=config.query,
            events_by_tag=events_by_tag,
            restarts=config.restarts,
            mean_run_s=max(1.0, config.events / config.events_per_s / (config.restarts + 1)),
            rng=random.Random(rng.getrandbits(64)),
        )
        for chain in chains
    ]
    for thread in threads:
        thread.start()
    try:

        def on_write(events: int) -> None:
            _raise_failure(chains)  # a failed query stops the writers too
            on_progress("write", events, config.events)

        written = run_writers(plan, on_progress=on_write)
        logged = read_writer_logs(logs)  # the writers have closed their logs
        with stores_at(config.journal) as stores:
            expected = expected_events(stores.journal, logged.appended_ns)
        _drain(config, chains, expected, visibility=logged.visible, on_progress=on_progress)
    finally:
        for thread in threads:
            thread.stop()
        for thread in threads:
            thread.join()
    return SimulationReport(
        config=config,
        events=written.events,
        write_seconds=written.seconds,
        conflicts=written.conflicts,
        verdict=check(
            expected,
            chains,
            visibility=logged.visible,
            settings=config.query,
            bucket_size=config.bucket_size,
        ),
        restarts=sum(max(0, len(chain.starts) - 1) for chain in chains),
    )


def _drain(
    config: SimulationConfig,
    chains: list[QueryChain],
    expected: dict[EventKey, Expected],
    *,
    visibility: Mapping[tuple[str, str], list[Range]],
    on_progress: Progress,
) -> None:
    """Wait until the queries delivered everything they still may, or no bound explains a delay.

    What they may still deliver: `has_nothing_left_to_wait_for`, given `visibility` (when each
    row became visible, as the writers logged it).
    """
    q = config.query
    # The writers have waited for their delayed writes, so everything is visible now: a query
    # needs the consistency delay and a back-track to reach the last of it, and may be in the
    # middle of a gap search. A writer's clock ahead put offsets up to the skew after now,
    # which a query reaches only then.
    patience = q.eventual_consistency_delay + q.back_track_interval + q.gap_timeout
    patience += timedelta(seconds=2, milliseconds=config.skew_ms)
    per_tag = Counter(tag for tag, _, _ in expected)
    target = sum(per_tag[chain.tag] for chain in chains)
    deadline = time.monotonic() + patience.total_seconds()
    while time.monotonic() < deadline:
        _raise_failure(chains)
        on_progress("deliver", sum(len(chain.distinct) for chain in chains), target)
        if has_nothing_left_to_wait_for(
            chains, expected, visibility, settings=q, bucket_size=config.bucket_size
        ):
            return
        time.sleep(0.2)


def _raise_failure(chains: list[QueryChain]) -> None:
    """Raise the error that ended a query, if one did (other than MissingTaggedEventError).

    No verdict can be given without that query's deliveries, and waiting for them was waiting
    for nothing.
    """
    for chain in chains:
        if chain.failure is not None:
            raise chain.failure
