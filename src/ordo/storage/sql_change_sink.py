"""The materializer's sink database: messages, the materialized table and progress, exactly once.

One micro-batch of a materializer is applied in one transaction: its messages go to
`cdc_messages`, their net effect to the materialized table, and the batch id to
`cdc_materializer_progress`, with the id of the Spark streaming query that applied it and the
rows the messages leave in the table (`table_rows`, see `_require_earlier_rows`). A batch
whose id the progress already covers (a replay after a restart or a retried batch) changes
nothing; a batch of another query (one run from another checkpoint, which numbers its batches
from 0 again), or one past the batch after the progress, is refused (`change_sink_checks`), and
so is a batch that finds the table gone after earlier batches stored messages, or without a row
where their messages leave rows (emptied, or created again by hand). The materialized
table follows the table's current accepted schema in
that transaction (`SqlMaterializedTable`). The SQL is the same on SQLite and PostgreSQL, written
with `{p}` placeholders; the backends add how they run one statement for many rows.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat

from ordo.cdc.change import ChangeMessage, ChangeOp
from ordo.cdc.column_type import ColumnType
from ordo.cdc.message_rows import MESSAGE_ROW_COLUMNS, MessageRows
from ordo.cdc.retype import retyped_row
from ordo.cdc.schema import TableSchema
from ordo.cdc.schema_registry import SchemaHistory
from ordo.errors import MaterializedTableMissingError
from ordo.processing.connection import SqlConnection
from ordo.storage.change_sink_checks import require_current_key, require_query
from ordo.storage.net_changes import NetChange, net_changes
from ordo.storage.sql_materialized_table import SqlMaterializedTable
from ordo.storage.stored_message import MESSAGE_COLUMNS, stored_message

_CREATE, _READ, _DELETE = ChangeOp.CREATE.value, ChangeOp.READ.value, ChangeOp.DELETE.value
"""The ops that bring a row into the table and take it out (`_require_earlier_rows`)."""


def _rows_added(messages: MessageRows) -> int:
    """The rows `messages` add to the table: their creates and reads less their deletes."""
    ops = messages.column("op")
    return ops.count(_CREATE) + ops.count(_READ) - ops.count(_DELETE)


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeBatchReceipt:
    """What `apply_batch` did: `is_applied` is False for a batch the progress already covered."""

    is_applied: bool
    messages: int


@dataclass(frozen=True, slots=True, kw_only=True)
class MaterializerProgress:
    """How far a materializer got: its last applied batch id (inclusive) and messages stored."""

    materializer: str
    batch_id: int
    messages: int
    query_id: str | None
    """The streaming query (so the checkpoint) that applied the batches; None for progress
    written before ordo recorded it, until the next batch is applied."""


class SqlChangeSink(SqlMaterializedTable):
    """Applies a materializer's micro-batches exactly once (thread-safe as its datastore is)."""

    def last_batch_id(self, materializer: str) -> int | None:
        """The last batch id the materializer applied (inclusive), or None."""
        row = self._fetchone(
            "SELECT batch_id FROM cdc_materializer_progress WHERE materializer = {p}",
            (materializer,),
        )
        return None if row is None else int(row[0])

    def progress(self) -> Sequence[MaterializerProgress]:
        """Every materializer that applied a batch, by name."""
        rows = self._fetchall(
            "SELECT p.materializer, p.batch_id, (SELECT count(*) FROM cdc_messages AS m "
            "WHERE m.materializer = p.materializer), p.query_id "
            "FROM cdc_materializer_progress AS p ORDER BY p.materializer",
            (),
        )
        return [
            MaterializerProgress(
                materializer=str(name), batch_id=int(batch), messages=int(count), query_id=query
            )
            for name, batch, count, query in rows
        ]

    def require_checkpoint(
        self, materializer: str, query_id: str | None, *, next_batch: int = 0
    ) -> None:
        """MaterializerCheckpointError unless query `query_id` may apply `materializer`'s batches.

        `query_id` is the id of the streaming query of the checkpoint the materializer is to
        run from (None: no query has run from it, it is new), `next_batch` the first batch it
        will apply (one after the checkpoint's last committed batch). A query may when the
        materializer has no progress and the query is at batch 0, and when the progress is
        the query's own or records no query (written before ordo recorded it: its first batch
        applied records it) and the query is at most at the batch after it
        (`change_sink_checks.require_query`).
        """
        with self._db.connection() as conn:
            progress = self._progress_row(conn, materializer)
            require_query(materializer, progress, query_id, next_batch)

    def read_messages(self, materializer: str) -> Iterator[ChangeMessage]:
        """Every message the materializer stored, in the order it emitted them (for checks).

        A stored message whose JSON was damaged is StorageIntegrityError (`stored_message`).
        """
        rows = self._fetchall(
            f"SELECT {MESSAGE_COLUMNS} FROM cdc_messages WHERE materializer = {{p}} "
            "ORDER BY batch_id, ordinal",
            (materializer,),
        )
        yield from map(stored_message, rows)

    def apply_batch(
        self,
        *,
        materializer: str,
        query_id: str,
        batch_id: int,
        target_table: str,
        messages: MessageRows,
        history: SchemaHistory,
    ) -> ChangeBatchReceipt:
        """Store and apply one micro-batch's `messages` (in order) in one transaction.

        `query_id` is the id of the streaming query whose batch it is: a batch of another query
        than the progress records, or one past the batch after the progress (after batch 0
        with no progress), is MaterializerCheckpointError, and nothing is written (see
        `require_checkpoint`). A batch with messages that finds `target_table` gone, though
        earlier batches stored messages, or without a row, though their messages leave rows, is
        MaterializedTableMissingError (`_require_earlier_rows`).
        `history` is the table's schema history as the sink's registry has it
        (`SchemaRegistry.history`), one object so that the schema, the retired columns, the
        former types and the old keys always come from the same versions. Its current
        schema is the table's current accepted one, which no message is newer than: the target
        table is created from it on first use, and follows it, in the transaction that applies
        the batch, by adding the columns it adds and dropping those it no longer has (an
        accepted drop or rename), retyping the columns it retypes and, while the table holds no
        row, taking its new primary key. Only the history's retired columns are dropped, and
        only columns the table holds in one of their former types are retyped, so a column
        someone added to the table by hand stays. A retype converts the rows' values, and is
        MaterializedRetypeError when one cannot be (`retyped_value`); a key change of a table
        with rows is MaterializedKeyChangeError (see `_rekey`): either way nothing is written.
        Values of columns the current schema does not have, which messages of an older version
        carry, are not materialized; their values of a column it retypes are written converted
        to its type (`retyped_row`), or the batch is UnconvertibleValueError (not a dead letter:
        the fold already moved on, see docs/cdc.md, 'Schemas'). A message naming one of the
        history's `old_key_ids`, written before a key change, makes the batch
        OldKeyMessageError. Either way nothing is written.
        """
        schema, former_types = history.current.schema, history.former_types
        added = _rows_added(messages)
        with self._db.write_transaction() as conn:
            if batch_id > 0:  # at most the batch after the progress (batch 0: none)
                require_query(
                    materializer, self._progress_row(conn, materializer), query_id, batch_id
                )
            claimed = conn.execute(
                self._sql(
                    "INSERT INTO cdc_materializer_progress "
                    "(materializer, batch_id, updated_at, query_id, table_rows) "
                    "VALUES ({p}, {p}, {p}, {p}, {p}) "
                    "ON CONFLICT (materializer) DO UPDATE SET batch_id = excluded.batch_id, "
                    "updated_at = excluded.updated_at, query_id = excluded.query_id, "
                    "table_rows = cdc_materializer_progress.table_rows + excluded.table_rows "
                    "WHERE cdc_materializer_progress.batch_id < excluded.batch_id AND "
                    "(cdc_materializer_progress.query_id IS NULL "
                    "OR cdc_materializer_progress.query_id = excluded.query_id) "
                    "RETURNING table_rows"
                ),
                (materializer, batch_id, time.time_ns() // 1_000_000, query_id, added),
            ).fetchone()
            if claimed is None:  # the row stays as it was (locked): a replay, or another query's
                progress = self._progress_row(conn, materializer)
                require_query(materializer, progress, query_id, batch_id)
                return ChangeBatchReceipt(is_applied=False, messages=0)
            require_current_key(target_table, messages, schema, history.old_key_ids)
            self._insert_messages(conn, materializer, batch_id, messages)
            rows = self._rows_before(conn, materializer, batch_id, claimed[0], added)
            if len(messages):
                created = self._ensure_table(
                    conn, target_table, schema, history.retired, former_types
                )
                self._require_earlier_rows(
                    conn, materializer, batch_id, target_table, created=created, rows=rows
                )
                self._apply(conn, target_table, net_changes(messages), schema, former_types)
        return ChangeBatchReceipt(is_applied=True, messages=len(messages))

    def _rows_before(
        self, conn: SqlConnection, materializer: str, batch_id: int, kept: int | None, added: int
    ) -> int:
        """The rows the messages of the batches before `batch_id` leave in the table.

        `kept` is the progress's `table_rows` as the claim of the batch left it, the batch's
        `added` rows included; NULL in progress an earlier ordo wrote (stays NULL in the
        claim), which has the earlier messages counted here once and the sum stored, so that
        no later batch counts them. The first batch's claim inserts the progress with its own
        rows: there are no earlier ones.
        """
        if kept is not None:
            return int(kept) - added
        counted = conn.execute(
            self._sql(
                "SELECT coalesce(sum(CASE WHEN op = {p} THEN -1 "
                "WHEN op IN ({p}, {p}) THEN 1 ELSE 0 END), 0) "
                "FROM cdc_messages WHERE materializer = {p} AND batch_id < {p}"
            ),
            (_DELETE, _CREATE, _READ, materializer, batch_id),
        ).fetchone()  # an aggregate: one row
        rows = int(counted[0])
        conn.execute(
            self._sql(
                "UPDATE cdc_materializer_progress SET table_rows = {p} WHERE materializer = {p}"
            ),
            (rows + added, materializer),
        )
        return rows

    def _require_earlier_rows(
        self,
        conn: SqlConnection,
        materializer: str,
        batch_id: int,
        table: str,
        *,
        created: bool,
        rows: int,
    ) -> None:
        """MaterializedTableMissingError when `table` lacks what batches before `batch_id` made.

        The first batch with messages creates the table, so one that `created` it later finds
        it gone (dropped, renamed, another target) after batches that stored messages. A table
        that exists but holds no row, where the earlier messages leave `rows` rows (creates
        and reads less deletes: each key's messages alternate between its row existing and
        not, see `ordo.cdc.change.fold`), was emptied or dropped and created again by hand (or
        is another target). Either way the batches from here on would fill in only the rows
        they touch, and the others, and the rows their messages' `before` names, would be
        missing for good (the transaction undoes the batch). `rows` is kept with the progress
        (`_rows_before`), so a batch pays at most one look at a row, and one at the last
        earlier batch with messages (an index seek) when it refuses or created the table.
        """
        name = self._identifier
        if not created and (
            rows <= 0 or conn.execute(f"SELECT 1 FROM {name(table)} LIMIT 1", ()).fetchone()
        ):
            return
        row = conn.execute(
            self._sql(
                "SELECT batch_id FROM cdc_messages WHERE materializer = {p} AND batch_id < {p} "
                "ORDER BY batch_id DESC LIMIT 1"
            ),
            (materializer, batch_id),
        ).fetchone()
        if row is None and created:
            return
        raise MaterializedTableMissingError(
            table=table,
            materializer=materializer,
            # the earlier messages deleted by hand: the last batch applied is the last known
            batch_id=batch_id - 1 if row is None else int(row[0]),
            rows=None if created else rows,
        )

    def _progress_row(
        self, conn: SqlConnection, materializer: str
    ) -> tuple[int, str | None] | None:
        """The materializer's last applied batch id (inclusive) and its query's id, or None."""
        row = conn.execute(
            self._sql(
                "SELECT batch_id, query_id FROM cdc_materializer_progress WHERE materializer = {p}"
            ),
            (materializer,),
        ).fetchone()
        return None if row is None else (int(row[0]), row[1])

    def _insert_messages(
        self,
        conn: SqlConnection,
        materializer: str,
        batch_id: int,
        messages: MessageRows,
    ) -> None:
        """The messages as they are (their JSON texts too), numbered in order."""
        count = len(messages)
        if not count:
            return
        columns = [messages.column(name) for name in MESSAGE_ROW_COLUMNS]
        rows = list(
            zip(
                repeat(materializer, count),
                repeat(batch_id, count),
                range(count),
                *columns,
                strict=True,
            )
        )
        placeholders = ", ".join(["{p}"] * (3 + len(MESSAGE_ROW_COLUMNS)))
        self._executemany(
            conn,
            self._sql(f"INSERT INTO cdc_messages ({MESSAGE_COLUMNS}) VALUES ({placeholders})"),
            rows,
        )

    def _apply(
        self,
        conn: SqlConnection,
        table: str,
        changes: Mapping[str, NetChange],
        schema: TableSchema,
        former_types: Mapping[str, Sequence[ColumnType]],
    ) -> None:
        """Delete and upsert the rows `changes` name, values in `schema`'s types."""
        name, p = self._identifier, self.PARAM
        columns, key = schema.by_name, schema.primary_key
        deletes: list[list[object]] = [
            json.loads(key_json) for key_json, change in changes.items() if change.is_deleted
        ]
        if deletes:
            self._convert_rows(deletes, key, schema)
            where = " AND ".join(f"{name(k)} = {p}" for k in key)
            self._executemany(conn, f"DELETE FROM {name(table)} WHERE {where}", deletes)
        shapes: dict[tuple[str, ...], tuple[str, ...]] = {}  # a row's columns -> the schema's
        by_columns: dict[tuple[str, ...], list[list[object]]] = {}
        for key_json, change in changes.items():
            values = change.values
            if values is None:
                continue
            if former_types:  # a message of an older version may carry a former type
                retyped_row(values, schema, former_types, key=json.loads(key_json))
            shape = tuple(values)
            names = shapes.get(shape)
            if names is None:
                names = shapes[shape] = tuple(n for n in shape if n in columns)
            by_columns.setdefault(names, []).append(
                # names is shape when as long: the values are in its order
                list(values.values()) if len(names) == len(shape) else [values[n] for n in names]
            )
        for names, rows in by_columns.items():
            self._convert_rows(rows, names, schema)
            assignments = [f"{name(n)} = excluded.{name(n)}" for n in names if n not in key]
            update = "DO UPDATE SET " + ", ".join(assignments) if assignments else "DO NOTHING"
            sql = (
                f"INSERT INTO {name(table)} ({', '.join(map(name, names))}) "
                f"VALUES ({', '.join([p] * len(names))}) "
                f"ON CONFLICT ({', '.join(map(name, key))}) {update}"
            )
            self._executemany(conn, sql, rows)

    def _convert_rows(
        self, rows: Sequence[list[object]], names: Sequence[str], schema: TableSchema
    ) -> None:
        """The rows' message values of the columns `names` (in place) as the driver takes them.

        The conversion is chosen once per column (`_key_converter`, `_value_converter`), and
        only the columns that need one are visited.
        """
        key_names, columns = schema.key_names, schema.by_name
        converters = [
            (index, convert)
            for index, n in enumerate(names)
            if (
                convert := (self._key_converter if n in key_names else self._value_converter)(
                    columns[n]
                )
            )
            is not None
        ]
        for row in rows:
            for index, convert in converters:
                value = row[index]
                if value is not None:
                    row[index] = convert(value)
