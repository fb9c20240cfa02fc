"""Projections on Spark: a user handler per segment partition, applied exactly once.

`projection(...)` streams a tag with `ordo_events_by_tag` and, for each micro-batch, runs the
handler on the executors, one task per segment, with each persistence id's events in order.
The handler writes through `context.connection` (the sink database: SQLite or PostgreSQL) in
one transaction with the last processed position of every persistence id it saw; a replayed
batch (a restart from the checkpoint, a retried task) skips what those positions cover, so it
applies nothing twice, whatever the segments were split or merged into meanwhile; an event past
the next one they expect fails the batch, so that it skips nothing either.

Once every task of a batch has committed, the driver moves the projection's tokens to the
batch's newest offset (TokenStore.advance_unclaimed), in the token store its source takes the
segments from (the journal's, when the source names the projection as its `processor`):
status and cleanup then judge it by what it applied, as they judge a tracking processor. The
tokens only report progress; the positions stay what dedupes, and Spark's checkpoint where the
stream resumes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from functools import partial

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql.functions import col, get_json_object
from pyspark.sql.streaming.query import StreamingQuery

from ordo import arguments
from ordo.clock import SystemClock
from ordo.errors import CheckpointMismatchError, ConfigurationError, ProjectionGapError
from ordo.journal import validation
from ordo.processing import HandlerContext, Segment
from ordo.processing.handler import require_handler
from ordo.processing.ports import DeadLetter
from ordo.query import EventEnvelope
from ordo.settings import ProcessorSettings
from ordo.settings.durations import at_least_a_millisecond, longest_durations
from ordo.settings.loading import flag
from ordo.spark.checkpoint import last_planned_offset, local_checkpoint_path
from ordo.spark.offsets import EventsByTagOffset
from ordo.spark.options import EventsByTagOptions
from ordo.spark.planner import recorded_journal_id
from ordo.spark.projection_lease import ProjectionLease, ProjectionQuery
from ordo.spark.query_arguments import check_query_arguments
from ordo.storage.location import parse_location, redacted_url
from ordo.storage.open import OpenMode, stores_at
from ordo.time import TimeUUID
from ordo.types import PersistenceId, SequenceNr, TagPidSequenceNr

Handler = Callable[[EventEnvelope, HandlerContext], object]

OWNER = "spark"
"""The owner a partition's batch transaction names. It stores no token (the driver advances
them, see advance_tokens) and so never checks it: a projection holds no claim."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProjectionSpec:
    """What a projection runs; picklable (it travels to the executors)."""

    processor: str
    sink: str
    """URL of the database the handler writes to (it also holds the positions)."""
    handler: Handler
    dead_letters: bool = False
    """Keep events the handler fails on in the dead-letter table instead of failing the batch."""
    sequencing_property: str | None = None
    """Sequence by this payload property instead of the persistence id (Axon's property
    policy): each batch is repartitioned by the property's value and sorted by offset within
    it. A persistence id's events may then be handled in different tasks, so the per-id
    positions cannot dedupe replays: such a projection is at-least-once."""
    claim_timeout: timedelta = ProcessorSettings().claim_timeout
    """A tracking processor's claim on one of the projection's segments (one of the same name,
    an operator's change) that was not extended for this long has expired: the segment's token
    moves with the projection's again (TokenStore.advance_unclaimed). Also how long a task's
    batch transaction may sit idle, as a tracking processor's batch."""

    def __post_init__(self) -> None:
        """Refuse what failed only in the tasks, or in the driver after a batch was applied.

        A handler that is not callable failed on every event in the tasks (with dead_letters,
        each event went to the dead letters); a claim_timeout that is not a duration failed
        the driver once a batch was committed to the sink, before the tokens moved;
        dead_letters="no" kept dead letters; a processor name the token store refuses, or an
        empty sequencing property, reached storage or Spark's JSON path first.
        """
        validation.processor_name(self.processor)
        parse_location(self.sink, what="sink")
        require_handler(self.handler)
        flag("dead_letters", self.dead_letters)
        if self.sequencing_property is not None and (
            not isinstance(self.sequencing_property, str) or not self.sequencing_property
        ):
            msg = (
                "sequencing_property must be a payload property's name or None, got "
                f"{self.sequencing_property!r:.80}"
            )
            raise ConfigurationError(msg)
        at_least_a_millisecond("claim_timeout", self.claim_timeout)
        longest_durations(self)

    @property
    def claim_timeout_ms(self) -> int:
        """claim_timeout in whole milliseconds (>= 1), as claims and idle limits are kept."""
        return self.claim_timeout // timedelta(milliseconds=1)


def projection(
    spark: SparkSession,
    spec: ProjectionSpec,
    *,
    source_options: dict[str, str],
    checkpoint: str,
    available_now: bool = False,
    processing_time: str | None = None,
) -> StreamingQuery:
    """Start the streaming projection; `source_options` are `ordo_events_by_tag`'s.

    Sequenced per persistence id, the source starts from the positions the projection applied
    (positionsOf / positionsAt, unless given): after a restart it hands on an event that
    showed up behind the checkpoint's offset, and waits for a missing one as for any gap.
    When the source takes its segments from the projection's own tokens (its `processor`
    option is the projection's), each batch moves them on (advance_tokens); otherwise the
    projection has no tokens, and the journal is not written to for them. While the query
    runs, the projection holds a lease in its sink (and the journal, with tokens there), so
    that a reset is refused (ProjectionLease); the query returned releases it once it ends.
    A local checkpoint of another tag, processor or journal is refused before the query starts
    (require_checkpoint_of), and so are arguments of the wrong kind (`check_query_arguments`;
    a `spec` that is no ProjectionSpec, `source_options` that are no mapping).
    """
    check_query_arguments(
        spark, checkpoint=checkpoint, available_now=available_now, processing_time=processing_time
    )
    arguments.instance(spec, ProjectionSpec, name="spec", error=ConfigurationError)
    arguments.mapping(source_options, name="source_options", error=ConfigurationError)
    options = dict(source_options)
    given = {key.lower() for key in options}
    if spec.sequencing_property is None and "positionsof" not in given:
        options.update(positionsOf=spec.processor, positionsAt=spec.sink)
    parsed = EventsByTagOptions.from_spark(options)
    require_checkpoint_of(parsed, checkpoint)
    tokens_at = parsed.journal if parsed.processor == spec.processor else None
    stream = spark.readStream.format("ordo_events_by_tag").options(**options).load()
    writer = stream.writeStream.foreachBatch(partial(_apply_batch, spec, tokens_at)).option(
        "checkpointLocation", checkpoint
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    elif processing_time is not None:
        writer = writer.trigger(processingTime=processing_time)
    databases: list[tuple[str, OpenMode]] = [(spec.sink, "migrate")]  # as the tasks open it
    if tokens_at not in (None, spec.sink):
        databases.append((tokens_at, "write"))  # its schema checked by the source's load()
    lease = ProjectionLease(spec.processor, databases)
    try:
        query = writer.queryName(spec.processor).start()
    except BaseException:
        lease.release()
        raise
    lease.hold(query)
    return ProjectionQuery(query, lease)


def require_checkpoint_of(options: EventsByTagOptions, checkpoint: str) -> None:
    """CheckpointMismatchError when a local checkpoint is another tag's, processor's or journal's.

    The source refuses an offset of another tag, processor or journal, but only once Spark has
    started the query; this reads the checkpoint's newest offset before. Offsets checkpointed
    before ordo recorded the journal's id name no journal: a query resuming from another
    journal's went on after that journal's position, and silently skipped every event of its
    own before it. For those, the source makes its processor's tokens in the journal as it
    plans a batch, so a journal without tokens of the processor whose batches the checkpoint
    holds is not the one read (a source naming no processor leaves no such trace).
    """
    local = local_checkpoint_path(checkpoint)
    document = None if local is None else last_planned_offset(local)
    if document is None:
        return
    offset = EventsByTagOffset.from_json_dict(document)
    offset.check_query(options.tag, options.processor_name)
    if offset.journal_id is not None:
        journal_id = recorded_journal_id(options.journal)
        offset.check_journal(journal_id, url=redacted_url(options.journal))
        return
    if options.processor is None or offset.processor != options.processor:
        return  # no tokens: a query that starts naming a processor keeps its checkpoint
    with stores_at(options.journal, mode="read") as stores:
        if options.processor in stores.tokens.processors():
            return
    raise CheckpointMismatchError(
        checkpointed=None,
        requested=redacted_url(options.journal),
        what="journal",
        evidence=f"it has no tokens of processor {options.processor!r}, which {checkpoint} "
        "holds batches of",
    )


def _apply_batch(
    spec: ProjectionSpec, tokens_at: str | None, batch: DataFrame, batch_id: int
) -> None:
    """Driver: hand each partition (a segment, or a share of the property's values) to a task.

    Then move the tokens in `tokens_at` (a token store's URL) to what the tasks applied.
    """
    if spec.sequencing_property is not None:
        value = get_json_object(col("payload").cast("string"), f"$.{spec.sequencing_property}")
        partitions = max(1, batch.rdd.getNumPartitions())
        batch = batch.repartition(partitions, value)  # apply_partition orders by offset
    applied = batch.rdd.mapPartitions(partial(_applied_in, spec)).collect()
    if tokens_at is not None and applied:
        advance_tokens(
            tokens_at,
            spec.processor,
            TimeUUID.from_bytes(max(applied)),
            now_ms=SystemClock().now_ns() // 1_000_000,
            claim_timeout_ms=spec.claim_timeout_ms,
        )


def advance_tokens(
    url: str, processor: str, offset: TimeUUID, *, now_ms: int, claim_timeout_ms: int
) -> None:
    """Move the processor's tokens at `url` to `offset`, the newest of a committed batch.

    Called once every task of the batch has committed (a failed task fails the batch first).
    Spark runs batches one after another, and a batch's partitions cover every segment, so
    every event the source delivered up to there is applied: the batch's newest offset holds
    for each segment, an idle one too. The source delivers in offset order, as a tracking
    processor's does: only an event that shows up late behind the offset is applied after it
    (when the source finds it). That holds under a sequencing property too, whose tasks each
    hold a share of every segment's events with interleaved offsets: no task alone could
    store a token, the driver can. Not in the tasks' transactions, which are the sink's: the
    tokens belong with the segments, in the journal whose tag views the tools judge by them.
    A driver that stops between the two leaves the tokens one batch behind until the batch
    is replayed (its tasks skip what the positions cover and report the same offsets).
    Opened as the tasks open the sink, without looking at the schema again: the source's
    `load()` checked the journal once, not every micro-batch. A segment whose claim has
    expired at `now_ms` moves too (its owner crashed without releasing it: its token would
    never move again otherwise).
    """
    with stores_at(url, mode="write") as stores:
        stores.tokens.advance_unclaimed(
            processor, offset, now_ms=now_ms, claim_timeout_ms=claim_timeout_ms
        )


def _applied_in(spec: ProjectionSpec, rows: Iterator[Row]) -> Iterator[bytes]:
    """Executor: apply_partition, handing the newest offset key it applied to the driver."""
    newest = apply_partition(spec, rows)
    if newest is not None:
        yield newest


def apply_partition(spec: ProjectionSpec, rows: Iterator[Row]) -> bytes | None:
    """Executor: apply one segment's events and their positions in one transaction.

    Returns the newest offset key of the events once they are committed (None without
    events): every event of the partition is applied then, now or by an earlier try.
    On PostgreSQL the transaction locks its ids' positions (and the rows the handler writes):
    a task frozen inside it (SIGSTOP, a paused VM) kept another run's batch of the same ids
    waiting for ever, so the server ends it once it sits idle for the claim timeout, as a
    tracking processor's batch (the frozen task then fails, nothing of it committed).
    """
    events = [_envelope(row) for row in rows]
    if not events:
        return None
    by_id = spec.sequencing_property is None
    if not by_id:
        # By offset, its sortable key: Spark's sort by the `timestamp` column (microseconds;
        # TimeUUIDs step by 100 ns) put a value's events of one microsecond in persistence id
        # order. The source's order per persistence id is kept when by_id.
        events.sort(key=lambda pair: pair[0].offset_key)
    segment = Segment(*map(int, events[0][1].split("/"))) if by_id else Segment.root()
    with (
        stores_at(spec.sink) as stores,
        stores.tokens.batch(
            spec.processor, segment.segment_id, OWNER, idle_limit_ms=spec.claim_timeout_ms
        ) as batch,
    ):
        seen = dict(batch.positions({e.persistence_id for e, _ in events})) if by_id else {}
        context = HandlerContext(
            processor=spec.processor,
            segment=segment,
            is_replay=False,
            connection=batch.connection,
            placeholder=batch.placeholder,
        )
        for envelope, _ in events:
            if not _is_next(spec, envelope, seen):
                continue  # applied already: a replayed batch, or an event's row read twice
            if spec.dead_letters:
                try:
                    with batch.savepoint():
                        spec.handler(envelope, context)
                except Exception as exc:  # user code: the event goes to the dead letters
                    batch.dead_letter(DeadLetter.of(envelope, exc))
            else:
                spec.handler(envelope, context)
            if by_id:
                batch.record(envelope.persistence_id, envelope.tag_pid_sequence_nr)
                seen[envelope.persistence_id] = envelope.tag_pid_sequence_nr
    return max(envelope.offset_key for envelope, _ in events)


def _is_next(spec: ProjectionSpec, envelope: EventEnvelope, seen: dict[PersistenceId, int]) -> bool:
    """Whether to apply the event: False when `seen` covers it, an error when it skips some.

    `seen` holds the last applied tag pid sequence nr of the ids the projection has applied
    events of. An id it has not seen may start anywhere (the query may start at an offset).

    Raises:
        ProjectionGapError: the id's next event is missing: the source was restarted after a
            MissingTaggedEventError and took the event after the gap for the id's first.

    """
    applied = seen.get(envelope.persistence_id)
    if applied is None:
        return True
    if envelope.tag_pid_sequence_nr > applied + 1:
        raise ProjectionGapError(
            processor=spec.processor,
            persistence_id=envelope.persistence_id,
            applied=applied,
            missing=tuple(range(applied + 1, envelope.tag_pid_sequence_nr)),
        )
    return envelope.tag_pid_sequence_nr > applied


def _envelope(row: Row) -> tuple[EventEnvelope, str]:
    envelope = EventEnvelope(
        offset_key=TimeUUID.parse(row.offset).to_bytes(),
        persistence_id=PersistenceId(row.persistence_id),
        tag_pid_sequence_nr=TagPidSequenceNr(row.tag_pid_sequence_nr),
        sequence_nr=SequenceNr(row.sequence_nr),
        serializer=row.serializer,
        manifest=row.manifest,
        payload_bytes=bytes(row.payload),
        metadata_json=row.metadata,
        tags_json=row.tags,
    )
    return envelope, str(row.segment)
