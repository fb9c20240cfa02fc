"""The materializer's sink on both backends: messages, the materialized table, replays."""

from __future__ import annotations

import threading
from collections.abc import Collection
from typing import Any

import psycopg
import pytest

from cdc_support import apply_as_m, history_of, keyed_message
from operations_support import execute, wait_for_a_lock_wait
from ordo.cdc import ChangeMessage, ChangeOp, Column, ColumnType, TableSchema
from ordo.errors import MaterializedTableMissingError, MaterializerCheckpointError
from ordo.storage.migration import load_migrations
from ordo.storage.open import stores_at
from ordo.storage.sql_change_sink import ChangeBatchReceipt, SqlChangeSink
from ordo.storage.stores import Stores

ID = Column(name="id", type=ColumnType.LONG, nullable=False)
V1 = TableSchema(
    table="odd table",
    columns=(
        ID,
        Column(name='say "hi"', type=ColumnType.STRING),
        Column(name="100%", type=ColumnType.DECIMAL),
        Column(name="ok", type=ColumnType.BOOLEAN),
        Column(name="doc", type=ColumnType.JSON),
        Column(name="raw", type=ColumnType.BYTES),
    ),
    partition_key=("id",),
)
V2 = TableSchema(
    table="odd table",
    columns=(*V1.columns, Column(name="note", type=ColumnType.STRING)),
    partition_key=("id",),
)
TARGET = 'odd "table"_materialized'
QUERY = "3f5e0d1c-0000-4000-8000-000000000001"
"""The id of the streaming query whose batches the tests apply."""


def _row(key: int, text: str, **more: Any) -> dict[str, Any]:
    return {
        "id": key,
        'say "hi"': text,
        "100%": "1.10",
        "ok": True,
        "doc": {"a": [1]},
        "raw": "00ff",
        **more,
    }


def _message(
    op: ChangeOp, key: int, before: dict[str, Any] | None, after: dict[str, Any] | None, sid: int
) -> ChangeMessage:
    """A message of the row `key` of the odd table, written at time `key`."""
    return keyed_message("odd table", op, key, before, after, schema_id=sid, at=key)


def _apply_with(
    sink: SqlChangeSink,
    batch_id: int,
    messages: list[ChangeMessage],
    schema: TableSchema,
    *,
    retired: Collection[str] = (),
) -> ChangeBatchReceipt:
    history = history_of(schema, retired=retired)
    return apply_as_m(sink, batch_id, messages, history, query_id=QUERY, target_table=TARGET)


def _table(stores: Stores) -> list[tuple[Any, ...]]:
    with stores.change_sink._db.connection() as conn:
        cursor = conn.execute('SELECT * FROM "odd ""table""_materialized" ORDER BY "id"')
        rows = cursor.fetchall()
        assert cursor.description is not None  # a SELECT has columns
        names = [d[0] for d in cursor.description]
    assert names[:6] == [c.name for c in V1.columns]
    return [tuple(row) for row in rows]


def test_a_batch_is_applied_once_with_its_messages_and_progress(stores: Stores) -> None:
    sink = stores.change_sink
    assert not sink.has_table(TARGET)  # created with the first messages
    a1, a2, b1 = _row(1, "a"), _row(1, "a2"), _row(2, "b")
    batch = [
        _message(ChangeOp.CREATE, 1, None, a1, 1),
        _message(ChangeOp.READ, 2, None, b1, 1),
        _message(ChangeOp.UPDATE, 1, a1, a2, 1),
    ]
    receipt = _apply_with(sink, 0, batch, V1)
    assert (receipt.is_applied, receipt.messages) == (True, 3)
    again = _apply_with(sink, 0, batch, V1)
    assert not again.is_applied
    assert sink.has_table(TARGET)
    rows = _table(stores)
    assert [row[:3] for row in rows] == [(1, "a2", rows[0][2]), (2, "b", rows[1][2])]
    assert str(rows[0][2]) == "1.10"
    assert bytes(rows[0][5]) == b"\x00\xff"
    assert sink.last_batch_id("m") == 0
    progress = [(p.materializer, p.batch_id, p.messages, p.query_id) for p in sink.progress()]
    assert progress == [("m", 0, 3, QUERY)]


def test_deletes_and_a_new_nullable_column_apply_in_order(stores: Stores) -> None:
    sink = stores.change_sink
    a, b = _row(1, "a"), _row(2, "b")
    created = [_message(ChangeOp.CREATE, 1, None, a, 1), _message(ChangeOp.CREATE, 2, None, b, 1)]
    _apply_with(sink, 0, created, V1)
    a_v2 = {**a, "note": "n"}
    changed = [
        _message(ChangeOp.DELETE, 2, b, None, 1),
        _message(ChangeOp.CREATE, 2, None, _row(2, "again"), 1),  # back with old columns
        _message(ChangeOp.UPDATE, 1, {**a, "note": None}, a_v2, 2),
    ]
    _apply_with(sink, 1, changed, V2)
    rows = _table(stores)
    assert [(row[0], row[1], row[-1]) for row in rows] == [(1, "a", "n"), (2, "again", None)]
    assert sink.last_batch_id("m") == 1


def test_a_double_columns_integer_is_written_as_the_double_it_reads_as(stores: Stores) -> None:
    """A double column's value may be any integer a double holds (ingested JSON keeps `2**63` an
    integer); SQLite cannot bind one beyond 64 bits, so the batch failed."""
    schema = TableSchema(
        table="odd table",
        columns=(ID, Column(name="x", type=ColumnType.DOUBLE)),
        partition_key=("id",),
    )
    values = {1: 2**63, 2: 2**1023, 3: -(2**53) - 1, 4: 7}
    batch = [_message(ChangeOp.CREATE, k, None, {"id": k, "x": x}, 1) for k, x in values.items()]
    _apply_with(stores.change_sink, 0, batch, schema)
    table = stores.change_sink.read_table(TARGET, schema)
    assert table == {(k,): {"id": k, "x": float(x)} for k, x in values.items()}
    assert {type(row["x"]) for row in table.values()} == {float}


def _columns(stores: Stores) -> list[str]:
    with stores.change_sink._db.connection() as conn:
        cursor = conn.execute('SELECT * FROM "odd ""table""_materialized" WHERE false')
        assert cursor.description is not None  # a SELECT has columns
        return [d[0] for d in cursor.description]


def test_a_column_the_current_schema_no_longer_has_is_dropped_with_the_batch(
    stores: Stores,
) -> None:
    """An accepted drop: the table loses the column in the transaction that applies the next
    batch, also when that batch's messages still carry it (changes written before the drop).
    A column someone added to the table by hand is no version's, so it stays."""
    sink = stores.change_sink
    a, b = {**_row(1, "a"), "note": "n"}, {**_row(2, "b"), "note": "m"}
    batch = [_message(ChangeOp.CREATE, 1, None, a, 2), _message(ChangeOp.CREATE, 2, None, b, 2)]
    _apply_with(sink, 0, batch, V2)
    assert _columns(stores)[-1] == "note"
    with sink._db.write_transaction() as conn:
        conn.execute('ALTER TABLE "odd ""table""_materialized" ADD COLUMN loaded_by TEXT', ())
    v3 = TableSchema(
        table="odd table",
        columns=tuple(c for c in V2.columns if c.name != "100%"),
        partition_key=("id",),
    )  # drops "100%", a name that needs quoting on both backends
    a2 = {**a, "note": "n2"}
    a3 = {k: v for k, v in a2.items() if k != "100%"}
    c = {k: v for k, v in _row(3, "c").items() if k != "100%"}
    batch = [
        _message(ChangeOp.UPDATE, 1, a, a2, 2),  # written under the older version
        _message(ChangeOp.UPDATE, 1, a3, {**a3, "note": "n3"}, 3),
        _message(ChangeOp.CREATE, 3, None, {**c, "note": None}, 3),
    ]
    assert _apply_with(sink, 1, batch, v3, retired={"100%", "loaded"}).is_applied
    assert _columns(stores) == [*(c.name for c in v3.columns), "loaded_by"]
    rows = sink.read_table(TARGET, v3)
    assert [(key, row["note"]) for key, row in sorted(rows.items())] == [
        ((1,), "n3"),
        ((2,), "m"),
        ((3,), None),
    ]


def _apply(sink: SqlChangeSink, query_id: str, batch_id: int, *keys: int) -> ChangeBatchReceipt:
    """A batch of `query_id` that creates the rows `keys`."""
    created = [_message(ChangeOp.CREATE, key, None, _row(key, f"v{key}"), 1) for key in keys]
    return apply_as_m(
        sink, batch_id, created, history_of(V1), query_id=query_id, target_table=TARGET
    )


def _stored(sink: SqlChangeSink) -> tuple[list[tuple[Any, ...]], list[object]]:
    """The progress (materializer, batch id, messages, query id) and the materialized keys."""
    progress = [(p.materializer, p.batch_id, p.messages, p.query_id) for p in sink.progress()]
    if not sink.has_table(TARGET):
        return progress, []
    with sink._db.connection() as conn:
        rows = conn.execute('SELECT "id" FROM "odd ""table""_materialized"').fetchall()
    keys = [row[0] for row in rows]
    return progress, sorted(keys)


def test_a_batch_of_another_query_is_refused_and_writes_nothing(stores: Stores) -> None:
    """A new checkpoint's query numbers its batches from 0 again, with empty fold state.

    Its batch 0 was skipped as a replay of the progress's batch 0, its changes lost; its later
    batches would repeat messages of keys that have them.
    """
    sink = stores.change_sink
    assert _apply(sink, QUERY, 0, 1).is_applied

    with pytest.raises(MaterializerCheckpointError) as refused:
        _apply(sink, "another-query", 0, 2)
    with pytest.raises(MaterializerCheckpointError):
        _apply(sink, "another-query", 1, 1, 2)

    assert str(refused.value) == (
        f"materializer 'm' was run from another checkpoint: its progress in the sink (batch 0) "
        f"was made by query {QUERY}, this checkpoint is query another-query's; nothing was "
        "written. Run it with the checkpoint it was run from, or start over under another "
        "--name and another --target-table (name=, target_table=; the table's default does not "
        "follow the name), which materializes the change log from its beginning"
    )
    assert (refused.value.recorded, refused.value.requested) == (QUERY, "another-query")
    assert _stored(sink) == ([("m", 0, 1, QUERY)], [1])
    assert not _apply(sink, QUERY, 0, 1).is_applied  # its own query's replay: skipped
    assert _apply(sink, QUERY, 1, 2).is_applied
    assert _stored(sink) == ([("m", 1, 2, QUERY)], [1, 2])


def test_a_first_batch_after_batch_0_is_refused_and_writes_nothing(stores: Stores) -> None:
    """A query's batches are numbered from 0 and each is applied: a sink without progress of
    the materializer that is handed batch 3 never got batches 0 to 2 (the checkpoint was run
    under another name or into another sink, or the progress was deleted and the checkpoint
    kept). Its fold state holds their changes: applied, the table would lack every row they
    made and the messages would start with updates whose `before` was never emitted."""
    sink = stores.change_sink
    with pytest.raises(MaterializerCheckpointError) as refused:
        _apply(sink, QUERY, 3, 1)

    assert str(refused.value) == (
        "materializer 'm' has no progress in the sink, but its checkpoint (query "
        f"{QUERY}) is at batch 3: the fold state holds the changes of its batches 0 to 2, "
        "which this sink never got; nothing was written. Run it with the --name and the sink "
        "it was run with, or start over with a new checkpoint (and, for this name, the "
        "materialized table and --messages emptied), which materializes the change log from "
        "its beginning"
    )
    assert (refused.value.batch_id, refused.value.requested) == (None, QUERY)
    assert _stored(sink) == ([], [])
    assert _apply(sink, QUERY, 0, 1).is_applied  # a query's first batch goes on
    assert _apply(sink, QUERY, 1, 2).is_applied


def test_a_batch_past_the_one_after_the_progress_is_refused_and_writes_nothing(
    stores: Stores,
) -> None:
    """A sink restored from a backup older than the checkpoint: its progress is at batch 0,
    while the checkpoint's query had batches 1 and 2 applied (to the sink as it was then) and
    its fold state holds their changes. Applied here, batch 3 would leave the table without the
    rows they made and update rows this sink has no message of; a query applies each batch."""
    sink = stores.change_sink
    assert _apply(sink, QUERY, 0, 1).is_applied

    with pytest.raises(MaterializerCheckpointError) as refused:
        _apply(sink, QUERY, 3, 2)
    with pytest.raises(MaterializerCheckpointError) as before_start:
        sink.require_checkpoint("m", QUERY, next_batch=3)

    assert (
        str(refused.value)
        == str(before_start.value)
        == (
            "materializer 'm' has progress in the sink up to batch 0, but its checkpoint (query "
            f"{QUERY}) is at batch 3: the fold state holds the changes of its batches 1 to 2, "
            "which this sink does not have (was it restored from an older copy?); nothing was "
            "written. Run it with the sink as that query left it, or start over under another "
            "--name and another --target-table with a new checkpoint, which materializes the "
            "change log from its beginning"
        )
    )
    assert (refused.value.batch_id, refused.value.checkpoint_batch) == (0, 3)
    assert _stored(sink) == ([("m", 0, 1, QUERY)], [1])
    sink.require_checkpoint("m", QUERY, next_batch=1)  # the batch after the progress goes on
    assert _apply(sink, QUERY, 1, 2).is_applied
    assert _stored(sink) == ([("m", 1, 2, QUERY)], [1, 2])


def test_a_batch_that_would_create_the_table_again_is_refused_and_writes_nothing(
    stores: Stores,
) -> None:
    """The materialized table dropped (or renamed, or the materializer pointed at another
    target) after batches stored messages into it: created again, it would hold only the rows
    of the batches from then on, not the fold of the materializer's messages."""
    sink = stores.change_sink
    assert _apply(sink, QUERY, 0, 1).is_applied
    assert _apply(sink, QUERY, 1).is_applied  # no messages: the table is not needed
    with sink._db.write_transaction() as conn:
        conn.execute('DROP TABLE "odd ""table""_materialized"', ())

    with pytest.raises(MaterializedTableMissingError) as refused:
        _apply(sink, QUERY, 2, 2)

    assert str(refused.value) == (
        f"materialized table {TARGET!r} does not exist, but materializer 'm' stored messages "
        "for it up to batch 0: the table was dropped or renamed, or the materializer was "
        "pointed at another --target-table (target_table=); created now, it would hold only "
        "the rows of the batches from here on; nothing was applied. Restore the table, run "
        "the materializer with the --target-table it was run with, or start over under "
        "another --name and another --target-table with a new checkpoint, which materializes "
        "the change log from its beginning"
    )
    assert (refused.value.table, refused.value.materializer, refused.value.batch_id) == (
        TARGET,
        "m",
        0,
    )
    assert _stored(sink) == ([("m", 1, 1, QUERY)], [])
    assert _apply(sink, QUERY, 2).is_applied  # a batch without messages goes on


def test_a_batch_that_finds_the_table_emptied_is_refused_and_writes_nothing(
    stores: Stores,
) -> None:
    """The materialized table dropped and created again by hand (same columns), or emptied: it
    exists, but the next batches would fill in only the rows they touch, and the rows the
    earlier messages left there (their "before" rows) would be missing for good. A table the
    messages themselves emptied goes on."""
    sink = stores.change_sink
    assert _apply(sink, QUERY, 0, 1, 2).is_applied
    with sink._db.write_transaction() as conn:
        conn.execute('DROP TABLE "odd ""table""_materialized"', ())
        sink._create(conn, TARGET, V1)  # as the sink creates it: the same columns and key

    a, a2 = _row(1, "v1"), _row(1, "a2")
    with pytest.raises(MaterializedTableMissingError) as refused:
        _apply_with(sink, 1, [_message(ChangeOp.UPDATE, 1, a, a2, 1)], V1)

    assert str(refused.value) == (
        f"materialized table {TARGET!r} holds no row, but the messages materializer 'm' stored "
        "for it up to batch 0 leave 2 rows in it: the table was emptied, or dropped and "
        "created again, or the materializer was pointed at another --target-table "
        "(target_table=); applied now, it would hold only the rows of the batches from here "
        "on; nothing was applied. Restore the table, run the materializer with the "
        "--target-table it was run with, or start over under another --name and another "
        "--target-table with a new checkpoint, which materializes the change log from its "
        "beginning"
    )
    assert (refused.value.batch_id, refused.value.rows) == (0, 2)
    assert _stored(sink) == ([("m", 0, 2, QUERY)], [])
    deleted = [_message(ChangeOp.DELETE, key, _row(key, f"v{key}"), None, 1) for key in (1, 2)]
    with sink._db.write_transaction() as conn:  # the rows back: the messages empty the table
        conn.execute('INSERT INTO "odd ""table""_materialized" ("id") VALUES (1), (2)', ())
    assert _apply_with(sink, 1, deleted, V1).is_applied
    assert _apply(sink, QUERY, 2, 3).is_applied
    assert _stored(sink) == ([("m", 2, 5, QUERY)], [3])


def test_a_checkpoint_is_checked_against_the_progress_before_its_query_starts(
    stores: Stores,
) -> None:
    sink = stores.change_sink
    sink.require_checkpoint("m", None)  # no progress: any checkpoint, a new one too
    _apply(sink, QUERY, 0, 1)

    sink.require_checkpoint("m", QUERY)
    with pytest.raises(
        MaterializerCheckpointError, match=f"by query {QUERY}, this checkpoint is new;"
    ):
        sink.require_checkpoint("m", None)
    with pytest.raises(MaterializerCheckpointError, match="this checkpoint is query other's;"):
        sink.require_checkpoint("m", "other")
    sink.require_checkpoint("n", "other")  # another materializer's progress is its own


def _sink_of_schema_version_5(url: str) -> None:
    """The sink database as ordo left it before it recorded the materializers' queries."""
    package = "ordo.storage.sqlite" if url.startswith("sqlite:") else "ordo.storage.postgres"
    for migration in load_migrations(package)[:5]:
        for statement in migration.statements:
            execute(url, statement)
    execute(url, "INSERT INTO ordo_metadata (key, value) VALUES ('schema_version', '5')")


def test_progress_without_a_query_is_upgraded_and_taken_by_the_next_batch_applied(
    journal_url: str,
) -> None:
    """Migration 6 adds the query to progress rows; an earlier row has none until a batch."""
    _sink_of_schema_version_5(journal_url)
    execute(
        journal_url,
        "INSERT INTO cdc_materializer_progress (materializer, batch_id, updated_at) "
        "VALUES ('m', 4, 0)",
    )
    with stores_at(journal_url) as stores:  # upgrades the schema
        sink = stores.change_sink
        assert _stored(sink) == ([("m", 4, 0, None)], [])
        sink.require_checkpoint("m", QUERY)  # a checkpoint's query may go on from it
        with pytest.raises(
            MaterializerCheckpointError,
            match=r"\(batch 4\) was made before ordo recorded its query, this checkpoint is new;",
        ):
            sink.require_checkpoint("m", None)  # a new checkpoint would start at batch 0

        assert not _apply(sink, "replayed", 4, 1).is_applied  # a replay takes nothing
        assert _apply(sink, QUERY, 5, 1).is_applied
        with pytest.raises(MaterializerCheckpointError, match=f"by query {QUERY}"):
            _apply(sink, "replayed", 6, 2)
        assert _stored(sink) == ([("m", 5, 1, QUERY)], [1])
        assert _kept_rows(sink) == 1  # counted (no earlier message) by the batch applied
    assert execute(journal_url, "SELECT value FROM ordo_metadata WHERE key = 'schema_version'") == [
        (str(load_migrations("ordo.storage.sqlite")[-1].version),)
    ]


@pytest.mark.postgres
def test_a_batch_racing_another_querys_first_batch_is_refused(postgres_dsn: str) -> None:
    """Both find no progress; the one that commits second must not apply its batch too."""
    refused: list[MaterializerCheckpointError] = []

    def apply(sink: SqlChangeSink) -> None:
        try:
            _apply(sink, QUERY, 0, 2)
        except MaterializerCheckpointError as exc:
            refused.append(exc)

    with stores_at(postgres_dsn) as stores, psycopg.connect(postgres_dsn) as first:
        first.execute(
            "INSERT INTO cdc_materializer_progress (materializer, batch_id, updated_at, query_id) "
            "VALUES ('m', 0, 0, 'first')"
        )  # not committed yet: the sink's batch waits for it
        racing = threading.Thread(target=apply, args=(stores.change_sink,))
        racing.start()
        wait_for_a_lock_wait(postgres_dsn, "INTO cdc_materializer_progress")
        first.commit()
        racing.join(timeout=30)

        assert [(e.recorded, e.requested) for e in refused] == [("first", QUERY)]
        assert stores.change_sink.progress()[0].query_id == "first"
        assert not stores.change_sink.has_table(TARGET)


def _kept_rows(sink: SqlChangeSink) -> object:
    """The rows the progress says the materializer's messages leave in the table."""
    with sink._db.connection() as conn:
        return conn.execute(
            "SELECT table_rows FROM cdc_materializer_progress WHERE materializer = 'm'", ()
        ).fetchone()[0]


def _run(sink: SqlChangeSink, *statements: str) -> None:
    """`statements` by hand, in one transaction: what an operator or an older ordo did."""
    with sink._db.write_transaction() as conn:
        for statement in statements:
            conn.execute(statement, ())


def _deleted(sink: SqlChangeSink, batch_id: int, *keys: int) -> ChangeBatchReceipt:
    """Batch `batch_id` deleting the rows `keys` that `_apply` created."""
    deletes = [_message(ChangeOp.DELETE, key, _row(key, f"v{key}"), None, 1) for key in keys]
    return _apply_with(sink, batch_id, deletes, V1)


def _update_of_an_emptied_table_is_refused(sink: SqlChangeSink, key: int) -> None:
    """Empties the table by hand; batch 4, updating the row `key`, is refused: the messages up
    to batch 3 leave one row."""
    _run(sink, 'DELETE FROM "odd ""table""_materialized"')
    before, after = _row(key, f"v{key}"), _row(key, "again")
    with pytest.raises(MaterializedTableMissingError) as refused:
        _apply_with(sink, 4, [_message(ChangeOp.UPDATE, key, before, after, 1)], V1)
    assert (refused.value.batch_id, refused.value.rows) == (3, 1)


def test_the_rows_the_messages_leave_are_kept_with_the_progress(stores: Stores) -> None:
    """The sink keeps the count with each batch instead of counting every earlier message when
    it finds the table empty (a table the messages empty often, an outbox, paid a scan of the
    whole message log per batch). The earlier messages are not counted again: with those of
    batch 0 deleted, a count of them would leave -1 rows and let the emptied table be filled."""
    sink = stores.change_sink
    assert _apply(sink, QUERY, 0, 1, 2).is_applied
    assert _kept_rows(sink) == 2
    created = _message(ChangeOp.CREATE, 3, None, _row(3, "v3"), 1)
    deleted = _message(ChangeOp.DELETE, 1, _row(1, "v1"), None, 1)
    assert _apply_with(sink, 1, [deleted, created], V1).is_applied
    assert not _apply_with(sink, 1, [deleted, created], V1).is_applied  # a replay adds nothing
    assert _kept_rows(sink) == 2
    assert _deleted(sink, 2, 2, 3).is_applied  # the messages empty the table
    assert _kept_rows(sink) == 0
    assert _apply(sink, QUERY, 3, 4).is_applied  # and the next batch goes on
    assert (_kept_rows(sink), _stored(sink)[1]) == (1, [4])

    _run(sink, "DELETE FROM cdc_messages WHERE materializer = 'm' AND batch_id = 0")
    _update_of_an_emptied_table_is_refused(sink, 4)
    assert _kept_rows(sink) == 1  # the refused batch changed nothing

    assert _apply(sink, QUERY, 4).is_applied  # without messages: the table is not looked at
    _run(sink, "DELETE FROM cdc_messages WHERE materializer = 'm'")
    with pytest.raises(MaterializedTableMissingError) as refused:
        _apply(sink, QUERY, 5, 5)
    assert (refused.value.batch_id, refused.value.rows) == (4, 1)  # no message: the last batch


def test_progress_without_the_rows_has_them_counted_once_by_the_next_batch(
    stores: Stores,
) -> None:
    """Progress an earlier ordo wrote holds no count (migration 9 adds the column as NULL): the
    next batch applied counts the earlier messages, once, and stores the sum with its own."""
    sink = stores.change_sink
    assert _apply(sink, QUERY, 0, 1, 2).is_applied
    assert _deleted(sink, 1, 1).is_applied
    _run(sink, "UPDATE cdc_materializer_progress SET table_rows = NULL")

    assert _apply(sink, QUERY, 2, 3).is_applied
    assert _kept_rows(sink) == 2
    assert _deleted(sink, 3, 2).is_applied  # rows 2 and 3 less 2
    _run(sink, "DELETE FROM cdc_messages WHERE materializer = 'm' AND batch_id = 0")
    _update_of_an_emptied_table_is_refused(sink, 3)  # counted again: -1 + 1 - 1 rows
