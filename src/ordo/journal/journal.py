"""The journal: appends events per persistence id and feeds their tags to the tag writers."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack

from ordo.clock import Clock, clock_or_system
from ordo.errors import (
    ConcurrencyConflictError,
    InvalidInputError,
    JournalClosedError,
    StorageUnavailableError,
)
from ordo.forking import OpeningProcess
from ordo.journal import validation
from ordo.journal.bucket_size import check_bucket_size
from ordo.journal.event import AppendReceipt, NewEvent, PersistedEvent, persisted_event
from ordo.journal.lease import WriterLease
from ordo.journal.ports import JournalStore
from ordo.journal.recovery import PidState, recover_persistence_id, shared_bucket, tag_writes
from ordo.journal.serialization import serialize_metadata, serialize_payload
from ordo.settings import EventsByTagSettings
from ordo.tagging import TagViewStore, TagWriters
from ordo.tagging.notification import Announcer
from ordo.time import TimeUUIDGenerator
from ordo.types import PersistenceId, SequenceNr, Tag, TagPidSequenceNr

logger = logging.getLogger(__name__)

_LOCK_STRIPES = 256
MAX_CACHED_TAG_SETS = 10_000
"""Distinct tag sets whose validation is remembered (applications use a handful)."""
MAX_CACHED_PERSISTENCE_IDS = 100_000
"""Per-id state kept in memory; an evicted id is recovered again on its next append."""


class Journal:
    """Appends events with optimistic concurrency and keeps the tag views in step.

    An application embeds one Journal per process. Several journals, in threads or processes, may
    append to the same database; each persistence id should have one writer at a time (as with
    Akka's persistent actors), and a second writer is stopped by ConcurrencyConflictError rather
    than corrupting anything. Tag pid sequence nrs are assigned here, per (persistence id, tag),
    stored with the event, and written to tag_views by the tag writers in batches. The first
    append to (or recover() of) a persistence id in this journal recovers its tag views: events
    whose tag_views rows a crash lost are written again with the same numbers. From its first
    write until close() the journal holds a writer lease (lease.py) naming the persistence ids
    it started, which the operations tools check before changing them. Thread-safe. Used only
    by the process that opened it: in a forked child every call is ForkedProcessError (open a
    Journal in each process), and close() does nothing there.
    """

    def __init__(
        self,
        store: JournalStore,
        tag_store: TagViewStore,
        *,
        settings: EventsByTagSettings | None = None,
        clock: Clock | None = None,
        writer_uuid: str | None = None,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self._opener = OpeningProcess("this Journal")
        self.settings = EventsByTagSettings.or_default(settings)
        # Stored with every event and in the writer lease: 5 or True was stored as a number,
        # a NUL refused by PostgreSQL only at the first append, and 0 or "" taken for None.
        self.writer_uuid = (
            str(uuid.uuid4())
            if writer_uuid is None
            else validation.owner_name(writer_uuid, name="writer_uuid")
        )
        self._store = store
        self._tag_store = tag_store
        clock = clock_or_system(clock)
        self._uuids = TimeUUIDGenerator(clock)
        self._lease = WriterLease(store, self.writer_uuid, clock)
        check_bucket_size(store.recorded_bucket_size(), self.settings.bucket_size)
        self._tag_writers = TagWriters(
            tag_store,
            max_message_batch_size=self.settings.max_message_batch_size,
            max_buffer_size=self.settings.max_buffer_size,
            flush_interval=self.settings.flush_interval,
            on_written=Announcer(tag_store) if self.settings.pubsub_notification else None,
        )
        self._on_close = on_close
        self._states: dict[PersistenceId, PidState] = {}
        self._tag_sets: dict[frozenset[Tag], tuple[Tag, ...]] = {}
        self._locks = [threading.Lock() for _ in range(_LOCK_STRIPES)]
        self._is_bucket_size_recorded = False
        self._is_closed = False

    def append(
        self,
        persistence_id: str,
        events: Sequence[NewEvent],
        *,
        expected_sequence_nr: int | None = None,
    ) -> AppendReceipt:
        """Append events atomically after `expected_sequence_nr` (default: whatever is last).

        Raises ConcurrencyConflictError when the persistence id is not at the expected
        sequence nr, and InvalidInputError subclasses for bad input; either way nothing is
        written, as when the journal refuses: TagWriteBacklogError while a tag's writer holds
        more than `max_buffer_size` events it cannot write (an outage: append again later);
        for good, TagWriteFailedError (a tag write failed as no retry mends) and
        WriterLeaseLostError (the writer lease may have lapsed). The first append to an id
        this journal has not seen reads the id's state (recovering its tag views) unless it
        expects 0, the way to create an id: then the write alone checks that the id is new.
        A StorageUnavailableError may leave the append written (a session lost while the server
        committed it): give `expected_sequence_nr` to append once, as appending again then fails
        with ConcurrencyConflictError if it was.
        """
        pid = validation.persistence_id(persistence_id)
        if isinstance(events, NewEvent) or not isinstance(events, Iterable):
            # A NewEvent alone (not in a list) or a number was a TypeError: not iterable.
            msg = f"events must be a sequence of NewEvents, got {type(events).__name__}"
            raise InvalidInputError(msg)
        if not events:
            msg = f"persistence_id={pid!r}: append needs at least one event"
            raise InvalidInputError(msg)
        expected = (
            None
            if expected_sequence_nr is None
            else validation.sequence_nr(
                expected_sequence_nr, name="expected_sequence_nr", minimum=0
            )
        )
        prepared = [self._prepare(event) for event in events]
        if not prepared:  # an empty iterator passes `not events`: it was an IndexError
            msg = f"persistence_id={pid!r}: append needs at least one event"
            raise InvalidInputError(msg)
        self._ensure_open()
        self._lease.check()
        self._tag_writers.admit()
        self._record_bucket_size()
        with self._lock_for(pid):
            self._ensure_open()
            state = self._states.get(pid)
            if state is None:
                state = self._assume_new(pid) if expected == 0 else self._recover(pid)
            elif expected is not None and expected != state.highest:
                state = self._recover(pid)  # another journal may have appended since
            if expected is not None and expected != state.highest:
                raise ConcurrencyConflictError(
                    persistence_id=pid, expected=expected, actual=state.highest
                )
            try:
                persisted = self._write(pid, state, prepared)
            except StorageUnavailableError:
                # A session lost while the server committed fails an append that is written:
                # the next one reads the id again (numbering after it, recovering its tag views).
                self._states.pop(pid, None)
                raise
            except ConcurrencyConflictError as exc:
                self._states.pop(pid, None)
                if expected is not None:
                    raise
                raise ConcurrencyConflictError(
                    persistence_id=pid, expected=exc.expected, actual=exc.actual, is_implicit=True
                ) from None
        return AppendReceipt(
            persistence_id=pid,
            first_sequence_nr=persisted[0].sequence_nr,
            last_sequence_nr=persisted[-1].sequence_nr,
            offsets=tuple(event.timeuuid for event in persisted),
        )

    def recover(self, persistence_id: str) -> SequenceNr:
        """Start a persistence id: complete its tag views after a crash; return its highest nr.

        Events whose tag_views rows were lost (buffered in a killed writer, or written without
        their progress, or refused by a store since fixed) are written again with their
        original tag pid sequence nrs. Refused for good as appends are.
        """
        pid = validation.persistence_id(persistence_id)
        self._ensure_open()
        self._lease.check()
        with self._lock_for(pid):
            return self._recover(pid).highest

    def replay(
        self,
        persistence_id: str,
        *,
        from_sequence_nr: int = 1,
        to_sequence_nr: int | None = None,
    ) -> Iterator[PersistedEvent]:
        """Events of a persistence id from `from_sequence_nr` to `to_sequence_nr`, inclusive."""
        pid = validation.persistence_id(persistence_id)
        start = validation.sequence_nr(from_sequence_nr, name="from_sequence_nr")
        self._ensure_open()
        end = (
            self._store.highest_sequence_nr(pid)
            if to_sequence_nr is None
            else validation.sequence_nr(to_sequence_nr, name="to_sequence_nr")
        )
        return self._store.read_events(pid, from_sequence_nr=start, to_sequence_nr=end)

    def highest_sequence_nr(self, persistence_id: str) -> SequenceNr:
        """The highest sequence nr of the persistence id (0 when it has none)."""
        pid = validation.persistence_id(persistence_id)
        self._ensure_open()
        return self._store.highest_sequence_nr(pid)

    def persistence_ids(self) -> Iterator[PersistenceId]:
        """Every persistence id ever appended to, in id order."""
        self._ensure_open()
        return self._store.persistence_ids()

    def delete_to(self, persistence_id: str, to_sequence_nr: int) -> int:
        """Delete events up to `to_sequence_nr` (inclusive); tag views keep them (seed 001).

        Tag views are written from the stored events, so the persistence id is recovered and
        every buffered row written first: deleting never loses a tag_views row or a number.
        """
        pid = validation.persistence_id(persistence_id)
        up_to = validation.sequence_nr(to_sequence_nr, name="to_sequence_nr")
        self._ensure_open()
        self._lease.check()
        with self._lock_for(pid):
            self._recover(pid)
            self._tag_writers.flush()
            return self._store.delete_events(pid, to_sequence_nr=up_to)

    def flush(self) -> None:
        """Write every buffered tag_views row now (and its progress).

        Raises the StorageError of a failed write (an outage: the rows stay buffered, flush
        again), and TagWriteFailedError once a tag write failed in a way no retry mends.
        """
        self._opener.refuse_other()  # a parent's thread may have held the writers' locks
        self._tag_writers.flush()

    def close(self) -> None:
        """Flush the tag writers and release the storage. Idempotent.

        Appends in flight end first, and their tag views are flushed: an append that waited
        for the database's lock was written once it came free, then refused its tag writes
        (JournalClosedError), so its caller, told it failed, appended the events again. An
        append that takes its lock after close() began is refused, having written nothing.
        Raises what flush() raises (TagWriteFailedError too: recovery writes those tag views in
        the journal opened again), after releasing everything. In a forked child it does
        nothing: what it would flush, release and close is the parent's, which closes it.
        """
        if self._is_closed or not self._opener.is_current:
            return
        self._is_closed = True
        try:
            try:
                with ExitStack() as held:
                    for lock in self._locks:
                        held.enter_context(lock)
                    self._tag_writers.close()
            finally:
                self._lease.close()
        finally:
            if self._on_close is not None:
                self._on_close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _prepare(self, event: NewEvent) -> tuple[str, bytes, str, str | None, tuple[Tag, ...]]:
        """Serialize and validate one event before anything is written.

        Anything but a NewEvent is refused here: a dict or the characters of a string failed
        with AttributeError, and a falsy manifest that is not a string (0, None) was stored as "".
        """
        if not isinstance(event, NewEvent):
            msg = f"events must be NewEvents, got {type(event).__name__}: {event!r:.80}"
            raise InvalidInputError(msg)
        serializer, data = serialize_payload(event.payload)
        metadata = serialize_metadata(event.metadata)
        manifest = "" if event.manifest == "" else validation.text(event.manifest, name="manifest")
        key = (
            event.tags
            if isinstance(event.tags, frozenset)
            else frozenset(validation.tag_collection(event.tags))
        )
        tags = self._tag_sets.get(key)
        if tags is None:
            tags = tuple(sorted(validation.tag(t) for t in key))
            if len(self._tag_sets) < MAX_CACHED_TAG_SETS:
                self._tag_sets[key] = tags
        return serializer, data, manifest, metadata, tags

    def _write(
        self,
        pid: PersistenceId,
        state: PidState,
        prepared: Sequence[tuple[str, bytes, str, str | None, tuple[Tag, ...]]],
    ) -> list[PersistedEvent]:
        """Number the prepared events after `state`, store them and hand them to the tag writer.

        Raises ConcurrencyConflictError, with nothing written, when the persistence id is not
        at `state.highest` in the store.
        """
        after = state.highest
        counters = dict(state.tag_pid_sequence_nrs)
        offsets = self._uuids.next_batch(len(prepared), after=state.last_offset)
        writer_uuid = self.writer_uuid
        persisted: list[PersistedEvent] = []
        for number, offset, (serializer, data, manifest, metadata, tags) in zip(
            range(after + 1, after + 1 + len(prepared)), offsets, prepared, strict=True
        ):
            tag_nrs: dict[Tag, TagPidSequenceNr] = {}
            for tag in tags:
                tag_nrs[tag] = counters[tag] = TagPidSequenceNr(counters.get(tag, 0) + 1)
            persisted.append(
                persisted_event(
                    pid,
                    SequenceNr(number),
                    offset,
                    writer_uuid,
                    serializer,
                    manifest,
                    data,
                    metadata,
                    tag_nrs,
                )
            )
        self._store.write_events(persisted, expected_sequence_nr=after)
        state.highest = persisted[-1].sequence_nr
        state.tag_pid_sequence_nrs = counters
        state.last_offset = offsets[-1]
        bucket_size = self.settings.bucket_size
        self._tag_writers.write(
            tag_writes(
                ((event, tag, nr) for event in persisted for tag, nr in event.tags.items()),
                bucket_size,
                bucket=shared_bucket(offsets, bucket_size),
            )
        )
        return persisted

    def _assume_new(self, pid: PersistenceId) -> PidState:
        """The state of an id appended with expected_sequence_nr=0 that this journal has not seen.

        Saves the recovery read of every new id (one round trip on PostgreSQL, about as long
        as the append itself). Safe: recovery of an id without events does nothing, and the
        write checks atomically that the id has none (ConcurrencyConflictError otherwise; its
        recovery then waits for the next append). Only for 0: an append without an expected nr
        to an id with events would ship its rows twice.
        """
        self._lease.cover(pid)
        self._lease.start()  # before the write: the lease covers every write
        return self._remember(pid, PidState(highest=SequenceNr(0)))

    def _recover(self, pid: PersistenceId) -> PidState:
        self._lease.cover(pid)
        self._lease.start()  # before recovery writes: the lease covers every write
        state = recover_persistence_id(
            pid, self._store, self._tag_store, self._tag_writers, self.settings, self._lease.publish
        )
        return self._remember(pid, state)

    def _remember(self, pid: PersistenceId, state: PidState) -> PidState:
        if len(self._states) >= MAX_CACHED_PERSISTENCE_IDS:
            self._states.pop(next(iter(self._states)), None)
        self._states[pid] = state
        return state

    def _lock_for(self, pid: PersistenceId) -> threading.Lock:
        return self._locks[hash(pid) % _LOCK_STRIPES]

    def _ensure_open(self) -> None:
        """JournalClosedError after close(), for reads too; ForkedProcessError in a forked child.

        close() releases the storage: a read after it went on reading an SQLite file, while a
        PostgreSQL journal's closed pool failed it as StorageUnavailableError. A child's copy
        would issue its parent's offsets (`TimeUUIDGenerator`) and buffer tag views no thread
        writes.
        """
        if self._is_closed:
            msg = "the journal is closed"
            raise JournalClosedError(msg)
        self._opener.refuse_other()

    def _record_bucket_size(self) -> None:
        if not self._is_bucket_size_recorded:
            recorded = self._store.record_bucket_size(self.settings.bucket_size)
            check_bucket_size(recorded, self.settings.bucket_size)
            self._is_bucket_size_recorded = True
