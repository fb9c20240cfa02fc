"""Errors of change data capture: mutations, schemas, materializing and captures."""

from __future__ import annotations

from ordo.errors.root import OrdoError


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


class MaterializedTableMissingError(CdcError):
    """A materializer's target table is gone or empty, though earlier batches' messages left rows.

    The sink creates the table with a materializer's first messages, so it exists once any
    batch stored one: a table that does not has been dropped or renamed, or the materializer
    was pointed at another target table. One that exists but holds no row, where the earlier
    messages leave `rows` rows (None: the table is gone), was emptied, or dropped and created
    again by hand, or is another target table. Created again, or applied to as it is, it would
    hold only the rows of the batches from then on, so it would not be the fold of the
    materializer's messages (G6). Raised by the sink before it applies anything of the batch.
    `batch_id` is the last batch that stored messages.
    """

    def __init__(
        self, *, table: str, materializer: str, batch_id: int, rows: int | None = None
    ) -> None:
        self.table, self.materializer, self.batch_id = table, materializer, batch_id
        self.rows = rows
        if rows is None:
            found = (
                f"materialized table {table!r} does not exist, but materializer "
                f"{materializer!r} stored messages for it up to batch {batch_id}: the table "
                "was dropped or renamed"
            )
            now = "created now"
        else:
            found = (
                f"materialized table {table!r} holds no row, but the messages materializer "
                f"{materializer!r} stored for it up to batch {batch_id} leave {rows} rows in "
                "it: the table was emptied, or dropped and created again"
            )
            now = "applied now"
        msg = (
            f"{found}, or the materializer was pointed at another --target-table "
            f"(target_table=); {now}, it would hold only the rows of the batches from here on; "
            "nothing was applied. Restore the table, run the materializer with the "
            "--target-table it was run with, or start over under another --name and another "
            "--target-table with a new checkpoint, which materializes the change log from its "
            "beginning"
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


class SourceRewoundError(CaptureError):
    """A capture's source committed a change at a position its change log holds for another.

    A capture publishes a source's changes at the source's own log positions, and skips those
    its change log already holds (a window peeked again after a crash). A change at such a
    position that the log does not hold exactly (no row there, or one captured at another
    moment) is another commit: the source's log went back under the same segment (a restore of
    a copy or a point-in-time recovery, a failover to a standby that had not received
    everything the old primary had published). Skipped, it would be lost without a word, and
    the source advanced past it. Raised before anything of the window is published; the source
    is not advanced. `position` is the lowest such position of the publish (every partition
    of every table looked at): the first change the capture would skip, where the source
    went back.
    """

    def __init__(self, *, table: str, segment: str, position: int) -> None:
        self.table, self.segment, self.position = table, segment, position
        msg = (
            f"table {table!r}, segment {segment!r}: the source committed a change at position "
            f"{position}, which its change log already holds for another change (or has "
            "passed): the source's log went back (it was restored from a copy or to a point "
            "in time, or failed over to a standby that had not received everything) and its "
            "new changes take positions already published; nothing was published and the "
            "source was not advanced. Its changes since are not in the change log, and the "
            "log may hold changes the source no longer has: capture the tables afresh with "
            "--snapshot into a new --change-log (on PostgreSQL with a new --slot, dropping "
            "the old one) and materialize it under another --name and --target-table with a "
            "new checkpoint (see docs/cdc.md, 'Limits')"
        )
        super().__init__(msg)
