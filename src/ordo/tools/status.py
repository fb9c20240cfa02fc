"""`ordo status`: the journal, every processor, CDC captures and materializers, in one report.

Counting reads whole tables (events, persistence ids, time buckets); status is an operator's
tool, not something to poll at a high rate.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ordo.cdc.ports import SchemaVersion, SourceStatus
from ordo.errors import ConfigurationError
from ordo.processing.ports import TokenEntry, TokenStore
from ordo.processing.segment_request import PendingRequest
from ordo.storage.change_sources import capture_slots_at, source_status_at
from ordo.storage.open import existing_stores_at
from ordo.storage.sql_change_sink import MaterializerProgress
from ordo.time import TimeUUID
from ordo.tools.ports import OperationsStore, WriterLeaseInfo
from ordo.wording import counted

if TYPE_CHECKING:
    from ordo.storage.parquet import ChangeLogSummary

RATE_WINDOW_MS = 60_000
"""The write rate is the events of this last window, per second."""


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalStatus:
    """The journal's id, and counts over the journal and its tag views."""

    journal_id: str | None
    """The id the journal recorded (what `ordo info` shows); None for schema 7 or older."""
    events: int
    persistence_ids: int
    tags: dict[str, int]
    """Events per tag."""
    time_buckets: int
    """(tag, time bucket) partitions of tag_views."""
    events_per_s: float
    """Appends over the last minute."""
    live_writers: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentStatus:
    """One segment of a processor: owner, token, claim age, in plain values for JSON.

    The token's display form (`<offset> (+1 merged part(s) ahead)`) is no offset a script can
    use, so the offset and the parts ahead are separate fields.
    """

    segment: str
    owner: str | None
    token: str | None
    """The offset the segment resumes after; None before its first event."""
    ahead: list[dict[str, str]]
    """The parts of a merge that processed further: `segment` and its `offset` each."""
    claim_age_ms: int | None
    claim_expired: bool
    """The owner has not renewed its claim within the claim timeout: any worker may take the
    segment (Axon's rule), so the owner named is most likely gone, not stuck."""
    replay_until: str | None
    """After a reset, the offset up to which events are replays, until the token reaches it.

    The boundary stays stored (a Spark projection's source reads it), but once the token has
    passed it nothing is a replay any more: status said "replays until" for good.
    """
    request: str | None = None
    """A split, merge, release or hand-over asked of the owner and not taken yet."""
    request_age_ms: int | None = None

    @classmethod
    def of(
        cls,
        entry: TokenEntry,
        *,
        now_ms: int,
        claim_timeout_ms: int,
        pending: PendingRequest | None = None,
    ) -> SegmentStatus:
        """The status of a stored segment at `now_ms`, with the request pending for it."""
        replay = None if entry.replay_until is None else entry.replay_until.reached
        if replay is not None and entry.token.offset is not None and entry.token.offset >= replay:
            replay = None
        return cls(
            segment=str(entry.segment),
            owner=entry.owner,
            token=None if entry.token.offset is None else str(entry.token.offset),
            ahead=[
                {"segment": str(part.segment), "offset": str(part.offset)}
                for part in entry.token.ahead
            ],
            claim_age_ms=None
            if entry.claimed_at_ms is None
            else max(0, now_ms - entry.claimed_at_ms),
            claim_expired=entry.owner is not None
            and not entry.is_held(now_ms=now_ms, claim_timeout_ms=claim_timeout_ms),
            replay_until=None if replay is None else str(replay),
            request=None if pending is None else pending.request.describe(),
            request_age_ms=None if pending is None else max(0, now_ms - pending.requested_at_ms),
        )

    @classmethod
    def every(
        cls,
        entries: Sequence[TokenEntry],
        pending: Sequence[PendingRequest],
        *,
        now_ms: int,
        claim_timeout_ms: int,
    ) -> list[SegmentStatus]:
        """The status of each of a processor's `entries` with its request among `pending`."""
        by_segment = {p.segment_id: p for p in pending}
        return [
            cls.of(
                entry,
                now_ms=now_ms,
                claim_timeout_ms=claim_timeout_ms,
                pending=by_segment.get(entry.segment.segment_id),
            )
            for entry in entries
        ]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessorStatus:
    """A tracking processor and how far behind the journal its slowest segment is.

    The token store does not know which tag a processor reads, so the lag in events counts
    every journal event after the slowest token (an upper bound for a processor of one tag).
    A processor with positions but no tokens (a Spark projection's own sink) has no segments
    and no lag, only its `positions`.
    """

    processor: str
    segments: list[SegmentStatus]
    lag_events: int | None
    """None without tokens: positions say how far each persistence id was applied, not read."""
    lag_ms: int | None
    """Now minus the slowest token's time while events follow it, 0 once none does (the age of
    what a caught-up processor read last is no lag); None when a segment has processed nothing."""
    positions: int | None = None
    """The positions of a processor without tokens (what `processors reset --sink` clears)."""


def journal_status(
    operations: OperationsStore,
    *,
    journal_id: str | None,
    events: int,
    persistence_ids: int,
    tags: dict[str, int],
    writers: Sequence[WriterLeaseInfo],
    now_ms: int,
) -> JournalStatus:
    """The journal part: id and counts given, buckets and the write rate read from `operations`."""
    since = TimeUUID.min_for_epoch_ns((now_ms - RATE_WINDOW_MS) * 1_000_000)
    recent = operations.count_events_after(since)
    return JournalStatus(
        journal_id=journal_id,
        events=events,
        persistence_ids=persistence_ids,
        tags=tags,
        time_buckets=operations.count_time_buckets(),
        events_per_s=round(recent / (RATE_WINDOW_MS / 1000), 1),
        live_writers=len(writers),
    )


def processor_status(
    tokens: TokenStore,
    operations: OperationsStore,
    processor: str,
    *,
    now_ms: int,
    claim_timeout_ms: int,
) -> ProcessorStatus:
    """One processor's segments and its lag behind the journal."""
    entries = tokens.entries(processor)
    segments = SegmentStatus.every(
        entries,
        tokens.pending_requests(processor),
        now_ms=now_ms,
        claim_timeout_ms=claim_timeout_ms,
    )
    offsets = [entry.token.offset for entry in entries]
    slowest = None if any(o is None for o in offsets) else min(o for o in offsets if o is not None)
    lag_events = operations.count_events_after(slowest)
    lag_ms = None if slowest is None else max(0, now_ms - slowest.epoch_ms) if lag_events else 0
    return ProcessorStatus(
        processor=processor, segments=segments, lag_events=lag_events, lag_ms=lag_ms
    )


def every_processor_status(
    tokens: TokenStore, operations: OperationsStore, *, now_ms: int, claim_timeout_ms: int
) -> list[ProcessorStatus]:
    """Every processor by name: those with tokens, and those with only positions.

    The latter are what a Spark projection leaves in its own sink; `processors status` lists
    them too, so a status of that sink is not empty.
    """
    untracked = tokens.processors_without_tokens()
    return [
        ProcessorStatus(
            processor=name, segments=[], lag_events=None, lag_ms=None, positions=untracked[name]
        )
        if name in untracked
        else processor_status(
            tokens, operations, name, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms
        )
        for name in sorted({*tokens.processors(), *untracked})
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class CdcStatus:
    """Every part of the CDC pipeline that can be inspected."""

    change_logs: list[ChangeLogSummary]
    schemas: list[SchemaVersion]
    materializers: list[MaterializerProgress]
    sources: list[SourceStatus]
    """The capture named by `--source`, else the journal database's wal2json slots."""

    def to_json(self) -> dict[str, object]:
        """The status as one JSON document (`--json`)."""
        sources = [
            {**dataclasses.asdict(source), "lag": source_lag(source)} for source in self.sources
        ]
        return {
            "change_logs": [dataclasses.asdict(s) for s in self.change_logs],
            "schemas": [
                {
                    "table": v.table,
                    "version": v.version,
                    "schema_id": v.schema_id,
                    "accepted": v.is_accepted,
                }
                for v in self.schemas
            ],
            "materializers": [dataclasses.asdict(m) for m in self.materializers],
            "sources": sources,
        }


def retention(source: SourceStatus) -> str:
    """What a source keeps for its capture, in words (WAL bytes, or change rows waiting).

    An invalidated slot keeps nothing (its restart_lsn is NULL): it read "0 changes waiting",
    as a drained SQLite change table does, when its changes were lost.
    """
    if source.invalidated:
        return "invalidated: WAL it needed was removed, its changes are lost"
    if source.retained_bytes is not None:
        return f"{source.retained_bytes:,} bytes of WAL retained"
    waiting = source.retained_changes or 0
    return f"{counted(waiting, 'change')} waiting"


def source_lag(source: SourceStatus) -> int | None:
    """How far the source's head is ahead of what the capture confirmed (positions)."""
    if source.head_position is None or source.confirmed_position is None:
        return None
    return source.head_position - source.confirmed_position


def cdc_status(
    journal_url: str,
    change_log: Path,
    *,
    source_url: str | None,
    tables: Sequence[str],
    slot: str,
) -> CdcStatus:
    """Read the change logs, the registry, the materializers' progress and the source's lag.

    Reads only: a source's capture is looked at, not installed. `tables` name the captured
    tables of `source_url`: ConfigurationError for tables without a source, and for a source
    without tables (on every backend alike, although only PostgreSQL's needs them to look).
    The change log is imported here: every `ordo` command imports this module (the CLI's
    `SegmentStatus`), and the change log's pyarrow (~0.1 s) only the CDC status reads.
    """
    from ordo.storage.parquet import ParquetChangeLog

    if source_url is None and tables:
        msg = f"--table {', '.join(tables)}: captured tables of which source? Name it (--source)"
        raise ConfigurationError(msg)
    if source_url is not None and not tables:
        msg = "name the captured tables of --source with --table (once per table)"
        raise ConfigurationError(msg)
    log = ParquetChangeLog(change_log)
    with existing_stores_at(journal_url) as stores:
        schemas = [v for table in stores.schemas.tables() for v in stores.schemas.versions(table)]
        materializers = list(stores.change_sink.progress())
    if source_url is None:
        sources = capture_slots_at(journal_url, log=log)
    else:
        sources = [source_status_at(source_url, tables, slot=slot, log=log)]
    return CdcStatus(
        change_logs=[log.summary(table) for table in log.tables()],
        schemas=schemas,
        materializers=materializers,
        sources=sources,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Status:
    """Everything `ordo status` shows."""

    journal: JournalStatus
    processors: list[ProcessorStatus]
    cdc: CdcStatus

    def to_json(self) -> dict[str, object]:
        """One JSON document (`--json`)."""
        return {
            "journal": dataclasses.asdict(self.journal),
            "processors": [dataclasses.asdict(p) for p in self.processors],
            "cdc": self.cdc.to_json(),
        }
