"""Every exception ordo raises.

OrdoError
├── ConfigurationError (ValueError)
│   ├── BucketSizeMismatchError
│   ├── CheckpointMismatchError
│   ├── MaterializerCheckpointError
│   ├── PartitionCountMismatchError
│   └── UnknownUrlSchemeError
├── InvalidInputError (ValueError)
│   ├── InvalidIdentifierError
│   ├── InvalidSequenceNrError
│   ├── SerializationError
│   ├── OffsetFormatError
│   ├── FutureOffsetError
│   └── InvalidSegmentOperationError
├── StorageError
│   ├── StorageUnavailableError (ConnectionError)
│   │   ├── StorageAccessError
│   │   ├── MissingFolderError
│   │   └── TransactionConflictError
│   ├── SchemaVersionError
│   └── StorageIntegrityError
│       └── ConcurrencyConflictError
├── MissingTaggedEventError
├── ProjectionGapError
├── TokenStoreError
│   ├── UnknownProcessorError (LookupError)
│   │   └── UnknownSegmentError
│   ├── UnableToClaimTokenError
│   ├── PendingHandOverError
│   └── PendingMergeError
├── PartialResetError
├── ElementFailedError
│   └── ElementTimeoutError (TimeoutError)
├── EventHandlingError
├── QueryFailedError
├── AlreadyRunningError
├── AppendStoppedError
├── JournalClosedError
├── StoresClosedError
│   └── ForkedProcessError
├── CdcError
│   ├── MalformedMutationError (ValueError)
│   ├── InvalidSchemaError (ValueError)
│   │   ├── NoPrimaryKeyError
│   │   ├── UnmappableColumnTypeError
│   │   └── JsonKeyColumnError
│   ├── IncompatibleSchemaError
│   ├── UnknownSchemaError (LookupError)
│   ├── MaterializedRetypeError
│   ├── MaterializedKeyChangeError
│   ├── OldKeyMessageError
│   ├── UnconvertibleValueError
│   └── CaptureError
│       └── ReplicationSlotMissingError
└── OperationRefusedError
    ├── ActiveWriterError
    └── TimeToLiveTooShortError
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ordo.wording import counted

if TYPE_CHECKING:
    from pathlib import Path

    from ordo.time import TimeUUID


class OrdoError(Exception):
    """Root of every error ordo raises: catch this to catch them all."""


class ConfigurationError(OrdoError, ValueError):
    """A setting, option or URL is invalid; the message names the key.

    `setting` is the settings field at fault, when there is one: settings loaded from the
    environment or a file put the variable or key it came from in front of the message.
    """

    def __init__(self, msg: str = "", *, setting: str | None = None) -> None:
        self.setting = setting
        super().__init__(msg)


class BucketSizeMismatchError(ConfigurationError):
    """The journal recorded another bucket size, which can never change afterwards.

    Recorded by `ordo init` with ORDO_BUCKET_SIZE set, or else by the first write: a journal
    just initialised may hold no event yet and still refuse another size.
    """

    def __init__(self, *, recorded: str, requested: str, advice: str = "") -> None:
        """`advice` says where the reader's bucket size is set (an option's name), if given."""
        self.recorded, self.requested, self.advice = recorded, requested, advice
        msg = (
            f"journal records bucket_size={recorded}, cannot open it with "
            f"bucket_size={requested} (the bucket size recorded by `ordo init` or the first "
            "write never changes)"
        )
        super().__init__(f"{msg}; {advice}" if advice else msg)

    def advised(self, advice: str) -> BucketSizeMismatchError:
        """The same error with `advice`.

        Only the caller knows where its reader's bucket size was set (an option, a variable, a
        flag); the library's message names the settings field.
        """
        return BucketSizeMismatchError(
            recorded=self.recorded, requested=self.requested, advice=advice
        )


class CheckpointMismatchError(ConfigurationError):
    """A streaming query's checkpoint was written by a query of another tag or processor.

    Resuming would start the tag at the other query's position and skip what lies before it
    (for another processor: every event it has not applied yet). `what` is "tag" or
    "processor".
    """

    def __init__(self, *, checkpointed: str, requested: str, what: str = "tag") -> None:
        self.checkpointed, self.requested, self.what = checkpointed, requested, what
        msg = (
            f"the checkpoint was written by a query of {what}={checkpointed!r}, this query's "
            f"{what} is {requested!r}: give it a checkpointLocation of its own"
        )
        super().__init__(msg)


class MaterializerCheckpointError(ConfigurationError):
    """A CDC materializer ran from another checkpoint than the one that made its progress.

    The sink records the Spark streaming query that applied a materializer's batches, and a
    query's id stays with its checkpoint. A new checkpoint's query numbers its batches from 0
    again and folds from empty state: the sink would skip its batches up to the progress as
    replays, and the later ones would repeat messages (a CREATE for a row that has messages).
    `recorded` is the progress's query id (None: written before ordo recorded it), `requested`
    the checkpoint's (None: no query has run from it yet).
    """

    def __init__(
        self, *, materializer: str, batch_id: int, recorded: str | None, requested: str | None
    ) -> None:
        self.materializer, self.batch_id = materializer, batch_id
        self.recorded, self.requested = recorded, requested
        made = "before ordo recorded its query" if recorded is None else f"by query {recorded}"
        this = "is new" if requested is None else f"is query {requested}'s"
        msg = (
            f"materializer {materializer!r} was run from another checkpoint: its progress in "
            f"the sink (batch {batch_id}) was made {made}, this checkpoint {this}; nothing was "
            "written. Run it with the checkpoint it was run from, or start over under another "
            "--name and another --target-table (name=, target_table=; the table's default "
            "does not follow the name), which materializes the change log from its beginning"
        )
        super().__init__(msg)


class PartitionCountMismatchError(ConfigurationError):
    """A table's change log was written with another number of partitions, which cannot change.

    Every change of a key must be in one partition, in order, where the publisher's
    deduplication reads the positions already published: another count would route a key to
    another partition. `recorded` is the log's count; None for a log written before ordo
    recorded counts, whose files do not fit `requested` (`stray` is a partition key and the
    partition it is in).
    """

    def __init__(
        self,
        *,
        table: str,
        recorded: int | None,
        requested: int,
        stray: tuple[str, int] | None = None,
    ) -> None:
        self.table, self.recorded, self.requested = table, recorded, requested
        if recorded is not None:
            msg = (
                f"table {table!r}: its change log has {recorded} partitions, a publish with "
                f"{requested} is refused (a key's changes must stay in one partition): use "
                f"--partitions {recorded} (partitions={recorded}), or leave it out to follow "
                "the log; nothing was published"
            )
        else:
            where = (
                "" if stray is None else f" (partition key {stray[0]} is in partition={stray[1]})"
            )
            msg = (
                f"table {table!r}: its change log was written before ordo recorded partition "
                f"counts and its files do not fit {requested} partitions{where}: use "
                "--partitions (partitions=) with the count it was written with; nothing was "
                "published"
            )
        super().__init__(msg)


class UnknownUrlSchemeError(ConfigurationError):
    """A journal URL names a backend ordo does not have."""


class InvalidInputError(OrdoError, ValueError):
    """A caller passed a value ordo rejects; nothing was changed."""


class InvalidIdentifierError(InvalidInputError):
    """A persistence id or tag is empty, too long or contains a NUL character."""


class InvalidSequenceNrError(InvalidInputError):
    """A sequence number is out of range (they start at 1; expected ones at 0)."""


class SerializationError(InvalidInputError):
    """A payload or metadata value cannot be serialized (not bytes and not JSON)."""


class OffsetFormatError(InvalidInputError):
    """A value is not a valid TimeUUID or offset."""


class FutureOffsetError(InvalidInputError):
    """A query was asked to start after now: nothing there can have been delivered."""


class MissingTaggedEventError(OrdoError):
    """A gap in a persistence id's tag pid sequence nrs stayed open until gap_timeout.

    Seed 001's MissingTaggedEventException: the query fails loudly instead of skipping.
    Restarting a query from `last_known_offset` searches further back; events after that offset
    that were delivered before are delivered again, so downstream must be idempotent.
    """

    def __init__(
        self,
        *,
        tag: str,
        persistence_id: str,
        missing: tuple[int, ...],
        searched_after: TimeUUID,
        searched_up_to: TimeUUID,
        last_known_offset: TimeUUID,
    ) -> None:
        self.tag, self.persistence_id, self.missing = tag, persistence_id, missing
        self.searched_after, self.searched_up_to = searched_after, searched_up_to
        self.last_known_offset = last_known_offset
        shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
        msg = (
            f"missing tagged events: tag={tag!r} persistence_id={persistence_id!r} "
            f"tag_pid_sequence_nrs=[{shown}] searched ({searched_after}, {searched_up_to}]; "
            f"restart from last_known_offset={last_known_offset} to search further back"
        )
        super().__init__(msg)


class ProjectionGapError(OrdoError):
    """A Spark projection was handed a persistence id's event past the next one it expects.

    The projection's positions say `applied` was the last tag pid sequence nr applied; the
    batch went on at `applied + 1 + len(missing)`. A query restarted after a
    MissingTaggedEventError takes the first event it meets after its checkpoint for an id's first,
    so it would skip the missing ones; the segment's batch is rolled back instead.
    """

    def __init__(
        self, *, processor: str, persistence_id: str, applied: int, missing: tuple[int, ...]
    ) -> None:
        self.processor, self.persistence_id = processor, persistence_id
        self.applied, self.missing = applied, missing
        shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
        msg = (
            f"projection {processor!r}: persistence_id={persistence_id!r} was applied up to "
            f"tag_pid_sequence_nr {applied}, the batch skips tag_pid_sequence_nrs [{shown}]; "
            "nothing of the segment's batch was applied (repair the tag views with "
            "`ordo verify --repair`, or go on past them with `ordo processors reset`, "
            "naming its own sink with --sink: see docs/spark.md)"
        )
        super().__init__(msg)


class StorageError(OrdoError):
    """The storage backend failed; the driver's error is chained as the cause."""


class StorageUnavailableError(StorageError, ConnectionError):
    """The database cannot be reached or opened."""


class StorageAccessError(StorageUnavailableError):
    """The server is up but refuses the URL's connection, or a file its access: not an outage.

    A wrong password, a role that does not exist or may not log in, a database that does not
    exist, no CONNECT privilege, no pg_hba.conf entry; or a file or folder this process may not
    read or write (an SQLite journal, a change log, a lock file). No retry mends it until
    someone changes the URL, the server's roles and grants or the file's permissions: code that
    rides out outages by retrying StorageUnavailableError (`ordo query --live`) gives up at
    once on this subclass. A subclass, so that callers catching StorageUnavailableError still
    catch it.
    """


class TransactionConflictError(StorageUnavailableError):
    """The server ended a transaction in a conflict with a concurrent one; retrying may succeed.

    PostgreSQL breaks a deadlock by rolling one of the transactions back (SQLSTATE 40P01) and
    refuses a serialization failure (40001): nothing of the transaction was written and the
    server is up, which "PostgreSQL is unavailable" told otherwise. A subclass of
    StorageUnavailableError, so that code retrying outages retries this too.
    """


class MissingFolderError(StorageUnavailableError):
    """An SQLite journal's folder does not exist, and only `ordo init` (init_storage) makes one.

    Opening an SQLite database (a journal, a `--sink`, in any mode) creates a missing file,
    but, as sqlite3 does, not its folder: a misspelt folder became a tree with a new, empty
    journal in it. `path` is the database file, `folder` the folder that is missing (its
    parent).
    """

    def __init__(self, path: Path) -> None:
        self.path, self.folder = path, path.parent
        msg = (
            f"no journal at {path}: no folder {path.parent} "
            "(`ordo init` or ordo.init_storage() creates both)"
        )
        super().__init__(msg)


class SchemaVersionError(StorageError):
    """The schema is newer than this ordo's, or older where it may only be read."""

    def __init__(self, *, found: int, supported: int) -> None:
        self.found, self.supported = found, supported
        if found > supported:
            msg = (
                f"journal schema version {found} is newer than this ordo supports ({supported}); "
                "upgrade ordo"
            )
        else:
            msg = (
                f"journal schema version {found} is older than this ordo's ({supported}); "
                "commands that only read do not upgrade it: run `ordo init`"
            )
        super().__init__(msg)


class StorageIntegrityError(StorageError):
    """A write violated a constraint of the stored data."""


class ConcurrencyConflictError(StorageIntegrityError):
    """Optimistic concurrency failed: another writer appended to the persistence id first.

    `expected` is the caller's expected sequence nr, or, for an append that gave none
    (`is_implicit`), the one the journal last knew of: the append is stopped all the same, so
    that a writer learns of another one; appending again appends after it.
    """

    def __init__(
        self, *, persistence_id: str, expected: int, actual: int, is_implicit: bool = False
    ) -> None:
        self.persistence_id, self.expected, self.actual = persistence_id, expected, actual
        self.is_implicit = is_implicit
        if is_implicit:
            msg = (
                f"persistence_id={persistence_id!r}: another writer appended since this journal "
                f"did (it knew sequence_nr {expected}, the journal is at {actual}); nothing was "
                "written, append again to append after it"
            )
        else:
            msg = (
                f"persistence_id={persistence_id!r}: expected sequence_nr {expected} "
                f"but the journal is at {actual}"
            )
        super().__init__(msg)


class AppendStoppedError(OrdoError):
    """A run of appends (`ordo append`) stopped part way: the appends before it stay written.

    Each persistence id's append is atomic on its own; the error says where the run stopped
    and what is already written, so that the input can be resumed from that line.
    """

    def __init__(self, *, line: int, appended_events: int, cause: OrdoError) -> None:
        self.line, self.appended_events, self.cause = line, appended_events, cause
        events = counted(appended_events, "event")
        if line > 2:
            written = f"the appends of lines 1-{line - 1} were written ({events})"
        elif line == 2:
            written = f"the append of line 1 was written ({events})"
        else:
            written = "nothing was written"
        super().__init__(f"line {line}: {type(cause).__name__}: {cause}; {written}")


class JournalClosedError(OrdoError):
    """The journal (or its tag writer) was used after close()."""


class StoresClosedError(OrdoError):
    """Stores (their datastore's connections) were used after close(); nothing was done.

    A programming error, not an outage: no retry mends it, so it is no StorageError, which
    the processors and the tag writers retry. An SQLite datastore used to open new
    connections that nothing closed, a PostgreSQL one to fail as StorageUnavailableError
    ("pool already closed"), which a tracking processor or a live query retried for ever.
    """


class ForkedProcessError(StoresClosedError):
    """A Journal, stores or a change source were used in a process that did not open them.

    A child made by os.fork (multiprocessing's default on Linux) inherits copies of them, whose
    connections are the parent's, and whose threads (the tag writers' flusher, the writer
    lease's heartbeat) do not run in the child. Nothing was done: open a Journal, stores, a
    query or a change source in each process. The stores are closed to the child, so what
    catches StoresClosedError (a tracking processor, which stops on it) catches this too.
    `opened_in` and `used_in` are process ids.
    """

    def __init__(self, *, what: str, opened_in: int, used_in: int) -> None:
        self.opened_in, self.used_in = opened_in, used_in
        msg = (
            f"{what} was opened in process {opened_in} and cannot be used in process "
            f"{used_in} (a forked child): open a new one in each process"
        )
        super().__init__(msg)


class InvalidSegmentOperationError(InvalidInputError):
    """A segment, segment id or segment count that Axon's rules forbid.

    Merging segments that are not siblings, splitting one whose mask already uses every bit of
    the hash, a set of ids no splits make, a count or id that is no int. A subclass of
    InvalidInputError (it used to derive from OrdoError and ValueError only, which it still
    does): the token store refuses a segment id that is no int as InvalidInputError, and one
    `except InvalidInputError` catches both.
    """


class TokenStoreError(OrdoError):
    """The token store refused an operation; nothing in it was changed."""


class UnknownProcessorError(TokenStoreError, LookupError):
    """No tokens exist for the processor (or segment) named."""


class UnknownSegmentError(UnknownProcessorError):
    """The processor has no segment of the id named, though it may have others.

    A split or merge since the id was read changes the ids. A subclass, so that callers
    catching UnknownProcessorError still catch it.
    """


class UnableToClaimTokenError(TokenStoreError):
    """Another owner holds the segment's claim and it has not expired."""


class PendingHandOverError(TokenStoreError):
    """A request would replace the hand-over that a merge of the segment waits for.

    The owner of a segment whose sibling another owner holds merges by asking that owner to
    hand the sibling over, through a request in the token store. A segment holds one request,
    so an operator's split, merge or release replaced the hand-over and held the merge up. It
    is refused instead: wait until the owner has handed the segment over (`ordo processors
    status` shows the pending request), or pass replace_hand_over=True
    (`--replace-hand-over`) to replace it anyway. `segment_id` and `target_owner` name the
    pending hand-over, `request` the refused request in an operator's words.
    """

    def __init__(
        self, *, processor: str, segment_id: int, target_owner: str | None, request: str
    ) -> None:
        self.processor, self.segment_id = processor, segment_id
        self.target_owner, self.request = target_owner, request
        msg = (
            f"processor {processor!r} segment {segment_id} is waiting for its owner to hand it "
            f"over to {target_owner!r} for a merge: a {request} request would replace that and "
            "hold the merge up (--replace-hand-over, or replace_hand_over=True, replaces it "
            "anyway)"
        )
        super().__init__(msg)


class PendingMergeError(TokenStoreError):
    """A hand-over was asked of a segment whose own owner is merging it with the asker's.

    Both owners of a pair of siblings merging it at once each asked the other to hand its
    segment over; each hand-over replaced the other's pending merge, so both handed their
    segment over and the pair swapped owners without merging. The lower segment's merge goes
    first: a hand-over of the lower segment is refused while its merge is pending (the owner
    asking for it leaves the merge and hands its own segment over when asked), and one of the
    higher segment replaces that segment's merge. `segment_id` names the segment asked for,
    `target_owner` the owner that asked.
    """

    def __init__(self, *, processor: str, segment_id: int, target_owner: str | None) -> None:
        self.processor, self.segment_id, self.target_owner = processor, segment_id, target_owner
        msg = (
            f"processor {processor!r} segment {segment_id} is being merged with its sibling by "
            f"its owner, whose merge goes first (the lower segment's): it will not hand the "
            f"segment over to {target_owner!r}"
        )
        super().__init__(msg)


class PartialResetError(OrdoError):
    """A reset across a journal and a projection's sink reset only the journal's tokens.

    The two databases change in two transactions: the journal's committed, then the sink's
    reset failed (`cause`, also the exception's __cause__: a projection started after the
    check, or the sink's database became unreachable), so the sink's positions are as they
    were. Running the same reset again once the projection is stopped finishes it: the
    journal's tokens are reset again (what they replay is kept) and the sink's positions go.
    """

    def __init__(self, *, processor: str, cause: OrdoError) -> None:
        self.processor, self.cause = processor, cause
        msg = (
            f"processor {processor!r} was reset in the journal but not in the sink ({cause}): "
            "the journal's tokens are reset, the sink's positions are not; run the same reset "
            "again, with the projection stopped, to finish it"
        )
        super().__init__(msg)


class ElementFailedError(OrdoError):
    """A handler failed on an element of parallel processing.

    `offset` is the failed element's offset (its index in the input) and `committed` the last
    offset that may be committed: every element up to it (inclusive) was processed.
    """

    def __init__(self, *, offset: int, committed: int, cause: BaseException) -> None:
        self.offset, self.committed, self.cause = offset, committed, cause
        msg = (
            f"handler failed on element offset={offset}: {cause!r}; "
            f"last committable offset={committed}"
        )
        super().__init__(msg)


class ElementTimeoutError(ElementFailedError, TimeoutError):
    """A handler did not finish an element within the per-element timeout."""


class EventHandlingError(OrdoError):
    """A tracking processor's handler kept failing on an event and the error mode is `fail`.

    The batch holding the event was rolled back, so nothing of it was applied; the processor
    stopped and its segments were released.
    """

    def __init__(
        self, *, processor: str, persistence_id: str, sequence_nr: int, cause: BaseException
    ) -> None:
        self.processor, self.persistence_id, self.sequence_nr = (
            processor,
            persistence_id,
            sequence_nr,
        )
        self.cause = cause
        msg = (
            f"processor {processor!r} failed on persistence_id={persistence_id!r} "
            f"sequence_nr={sequence_nr}: {cause!r}"
        )
        super().__init__(msg)


class QueryFailedError(OrdoError):
    """A Spark streaming query of an ordo job stopped with an error.

    The message names the exception that stopped it; Spark's own exception is the cause.
    """


class AlreadyRunningError(OrdoError):
    """Another process runs the same job (a capture of the source, a query on the checkpoint).

    Two copies of one job would publish a source's changes twice or fight over a checkpoint;
    the second is refused before it changes anything. The message names the running copy. A
    TrackingProcessor started again while its threads run is refused with it too, and an
    `events_by_tag_at(...)` entered again inside its own `with` block.
    """


class CdcError(OrdoError):
    """Change data capture refused or stopped; nothing captured was lost."""


class MalformedMutationError(CdcError, ValueError):
    """A raw mutation (on the ingestion path, or built by a capture) is not well formed."""


class InvalidSchemaError(CdcError, ValueError):
    """A table schema cannot be used: duplicate or unknown columns, a bad document."""


class NoPrimaryKeyError(InvalidSchemaError):
    """A captured or declared table has no primary key, so its changes cannot be keyed."""


class UnmappableColumnTypeError(InvalidSchemaError):
    """A source column has a type the schema registry has no logical type for."""


class JsonKeyColumnError(InvalidSchemaError):
    """A captured table's primary key has a JSON column, which cannot key its rows."""


class IncompatibleSchemaError(CdcError):
    """A table's schema changed incompatibly; the pipeline stops until an operator accepts it.

    `version` is the registered, not yet accepted version; `problems` says what changed.
    """

    def __init__(self, *, table: str, version: int, problems: tuple[str, ...]) -> None:
        self.table, self.version, self.problems = table, version, problems
        msg = (
            f"table {table!r}: schema version {version} is incompatible ({'; '.join(problems)}); "
            f"review it and run `ordo cdc schemas accept {table} {version}` to go on"
        )
        super().__init__(msg)


class UnknownSchemaError(CdcError, LookupError):
    """No schema is registered for the table (or schema id) named."""


class MaterializedRetypeError(CdcError):
    """A row of a materialized table holds a value the column's accepted new type cannot take.

    Raised by the sink in the transaction that would retype the column, so nothing of the batch
    is applied. `key` is the row's primary key and `value` its value (JSON form, old type).
    """

    def __init__(
        self, *, table: str, column: str, old: str, new: str, key: tuple[object, ...], value: object
    ) -> None:
        self.table, self.column, self.old, self.new = table, column, old, new
        self.key, self.value = key, value
        msg = (
            f"materialized table {table!r}: column {column!r} cannot be retyped {old} -> {new}: "
            f"the row with key {key!r} holds {value!r}, which is not a {new}; nothing was "
            "applied. Correct or clear that value in the table and run the materializer again, "
            "or materialize into another --target-table (see docs/cdc.md, 'Schemas')"
        )
        super().__init__(msg)


class MaterializedKeyChangeError(CdcError):
    """A materialized table with rows would need another primary key (an accepted key change).

    `key` is the table's primary key, `new_key` the current schema's; `retyped` describes key
    columns whose type changed (their values, so the rows' keys, change too).
    """

    def __init__(
        self,
        *,
        table: str,
        key: tuple[str, ...],
        new_key: tuple[str, ...],
        retyped: tuple[str, ...] = (),
    ) -> None:
        self.table, self.key, self.new_key, self.retyped = table, key, new_key, retyped
        how = f" ({'; '.join(retyped)})" if retyped else ""
        msg = (
            f"materialized table {table!r} holds rows keyed by {key}, the table's current "
            f"schema is keyed by {new_key}{how}: the materializer's state and every later "
            "message are keyed by the new key, so no message would update or delete these rows; "
            "nothing was applied. Materialize the table afresh from a change log that starts "
            "with the new key (see docs/cdc.md, 'Schemas')"
        )
        super().__init__(msg)


class OldKeyMessageError(CdcError):
    """A sink batch holds a message keyed otherwise than the table's current schema.

    A message naming a schema version keyed otherwise (other key columns, or a key column typed
    otherwise: `SchemaHistory.old_key_ids`), written before an accepted key change: no row of
    the table is keyed so, even where its key's values would fit the new key's columns. Raised
    by the sink before it applies anything of the batch. `key` is the message's key values,
    `new_key` the current schema's key columns, `schema_id` the version the message names.
    """

    def __init__(
        self, *, table: str, key: tuple[object, ...], new_key: tuple[str, ...], schema_id: object
    ) -> None:
        self.table, self.key, self.new_key, self.schema_id = table, key, new_key, schema_id
        msg = (
            f"materialized table {table!r}: a message of schema id {schema_id} is keyed by "
            f"{key!r}, the table's current schema by {new_key}: it was written before a key "
            "change, and no row of the table is keyed so; nothing was applied. Materialize the "
            "table afresh from a change log that starts with the new key (see docs/cdc.md, "
            "'Schemas')"
        )
        super().__init__(msg)


class UnconvertibleValueError(CdcError):
    """A value written under one schema version does not convert to another's type for its column.

    After an accepted retype, a message shows each column in the type its version gives it, and
    the sink writes each in the table's current type, converting with `ordo.cdc.retype`; a value
    that does not convert (`'abc'` for a long) stops the materializer (in the fold or in the
    sink, nothing of the batch applied), as a table's row does (MaterializedRetypeError). `key`
    is the row's primary key, `value` the value (JSON form) and `type` the type it misses.
    """

    def __init__(
        self, *, table: str, column: str, type: str, key: tuple[object, ...], value: object
    ) -> None:
        self.table, self.column, self.type, self.key, self.value = table, column, type, key, value
        msg = (
            f"table {table!r}: the row with key {key!r} holds {value!r} in column {column!r}, "
            f"written under a schema version that typed the column otherwise, and it does not "
            f"convert to a {type}, its type where it is to be shown; nothing was applied. "
            "Materialize the table afresh from a change log captured with --snapshot after "
            "the retype (see docs/cdc.md, 'Schemas')"
        )
        super().__init__(msg)


class CaptureError(CdcError):
    """A capture cannot go on (its source changed under it); the slot was not advanced."""


class ReplicationSlotMissingError(CaptureError):
    """The replication slot a capture reads from no longer exists (it was dropped)."""


class OperationRefusedError(OrdoError):
    """An operations tool (reconciliation, cleanup, expiry) refused to run; nothing was changed."""


class ActiveWriterError(OperationRefusedError):
    """A live writer lease covers persistence ids the operation would change.

    `writers` maps each covered persistence id to the writers whose leases cover it (`*` when
    the operation touches every persistence id). Stop the writers, wait for their leases to
    expire, or pass force=True (`--force`) when they are known not to write these ids.
    """

    def __init__(self, *, operation: str, writers: dict[str, tuple[str, ...]]) -> None:
        self.operation, self.writers = operation, writers
        shown = ", ".join(
            f"{pid!r} (writer {', '.join(owners)})" for pid, owners in list(writers.items())[:5]
        )
        more = f" and {len(writers) - 5} more" if len(writers) > 5 else ""
        msg = (
            f"{operation} refused: live writers hold leases on persistence_id {shown}{more}; "
            "stop them or pass --force (force=True)"
        )
        super().__init__(msg)


def _duration(milliseconds: int) -> str:
    """`milliseconds` in the largest unit it fills: "1.5 s", "2 h", "30 days".

    A TTL or a lag is hours or days long; as seconds it printed as "2.592e+06s".
    """
    for unit_ms, unit in ((86_400_000, "days"), (3_600_000, "h"), (60_000, "min")):
        if milliseconds >= unit_ms:
            amount = f"{milliseconds / unit_ms:,.1f}".removesuffix(".0")
            return f"{amount} {'day' if (amount, unit) == ('1', 'days') else unit}"
    return f"{milliseconds / 1000:g} s"


class TimeToLiveTooShortError(OperationRefusedError):
    """Deleting tag_views rows before a time would remove events a processor has not read.

    `lags` maps each such processor to its lag in milliseconds (None: it has read nothing yet,
    so it would read from the start). Seed 000: the TTL must be greater than any expected delay
    in using the tagged events.
    """

    def __init__(self, *, retention_ms: int, lags: dict[str, int | None]) -> None:
        self.retention_ms, self.lags = retention_ms, lags
        shown = ", ".join(
            f"{name!r} ({'nothing read yet' if lag is None else f'{_duration(lag)} behind'})"
            for name, lag in lags.items()
        )
        msg = (
            f"refused: keeping only the last {_duration(retention_ms)} of tag views would delete "
            f"events that processor(s) {shown} have not processed (--force, or force=True, "
            "deletes them anyway)"
        )
        super().__init__(msg)
