"""What the CDC tests share: tables and their versions, writes and folds, the sink's batches."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import textwrap
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from hypothesis import strategies as st

from ordo.cdc import (
    Audit,
    Cell,
    ChangeMessage,
    ChangeOp,
    Column,
    ColumnType,
    Mutation,
    PartitionState,
    SchemaVersion,
    TableSchema,
)
from ordo.cdc.change import Row
from ordo.cdc.materializer import SchemaResolver, materialize_partition
from ordo.cdc.message_rows import MessageRows
from ordo.cdc.mutation import JsonValue
from ordo.cdc.schema_catalog import SchemaCatalog
from ordo.cdc.schema_registry import SchemaHistory
from ordo.storage.sql_change_sink import ChangeBatchReceipt, SqlChangeSink

USER_ID = Column(name="id", type=ColumnType.LONG, nullable=False)
USERS = TableSchema(
    table="users",
    columns=(
        USER_ID,
        Column(name="name", type=ColumnType.STRING),
        Column(name="age", type=ColumnType.LONG),
    ),
    partition_key=("id",),
)


def _retyped_schema(n: ColumnType) -> TableSchema:
    return TableSchema(
        table="t",
        columns=(
            Column(name="id", type=ColumnType.LONG, nullable=False),
            Column(name="n", type=n),
            Column(name="s", type=ColumnType.STRING),
        ),
        partition_key=("id",),
    )


def accepted_versions(*schemas: TableSchema) -> list[SchemaVersion]:
    """Accepted versions 1, 2, ... of the schemas (of one table), with schema ids 11, 12, ..."""
    return [
        SchemaVersion(
            schema_id=10 + number,
            table=schema.table,
            version=number,
            schema=schema,
            is_accepted=True,
            registered_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        )
        for number, schema in enumerate(schemas, 1)
    ]


def accepted_catalog(*schemas: TableSchema) -> SchemaCatalog:
    """The catalog of `accepted_versions(*schemas)`, as the materializer resolves them."""
    versions = accepted_versions(*schemas)
    return SchemaCatalog(schemas[0].table, lambda: versions)


RETYPED_VERSIONS = accepted_versions(
    _retyped_schema(ColumnType.LONG), _retyped_schema(ColumnType.STRING)
)
"""Table `t` (id, n, s): version 1 (schema id 11) types `n` long, version 2 (id 12, an
accepted retype) string."""
RETYPED = SchemaCatalog("t", lambda: RETYPED_VERSIONS)


def schema_of_t(*columns: str, of: ColumnType = ColumnType.LONG) -> TableSchema:
    """Table `t`: the key `id` (a long), and `columns` of the type `of`."""
    key = Column(name="id", type=ColumnType.LONG, nullable=False)
    values = (Column(name=name, type=of) for name in columns)
    return TableSchema(table="t", columns=(key, *values), partition_key=("id",))


def write(
    position: int, schema_id: int, *, key: int = 1, at: int | None = None, **cells: JsonValue
) -> Mutation:
    """A write of `key` of table `t` at `position` (write time `at`, default the position)."""
    written = position if at is None else at
    return Mutation(
        table="t",
        partition_key=(key,),
        cells={name: Cell(value=value, write_time=written) for name, value in cells.items()},
        liveness=Cell(value=True, write_time=written),
        schema_id=schema_id,
        audit=Audit(source="test", position=position),
    )


def fold_one_by_one(
    mutations: Iterable[Mutation], resolve: SchemaResolver
) -> tuple[PartitionState, list[ChangeMessage]]:
    """Fold each mutation as its own micro-batch: the state after the last, and the messages."""
    state = PartitionState()
    messages: list[ChangeMessage] = []
    for mutation in mutations:
        folded = materialize_partition(state, [mutation], resolve)
        state = folded.state
        messages.extend(folded.messages)
    return state, messages


COLUMNS = ("a", "b", "c")
times = st.integers(min_value=1, max_value=30)  # few values: ties happen often
values = st.none() | st.integers(min_value=0, max_value=3) | st.sampled_from(["x", "y"])
cells = st.builds(
    Cell,
    value=values,
    write_time=times,
    ttl_s=st.none() | st.just(None) | st.integers(min_value=1, max_value=2),
)


@st.composite
def mutations(draw: st.DrawFn) -> Mutation:
    """A write, insert, row delete or partition delete of partition key 7 (few values: ties)."""
    clustering = draw(st.sampled_from([(), (1,), (2,)]))
    kind = draw(st.sampled_from(["write", "insert", "row_delete", "partition_delete"]))
    audit = Audit(source="test", replica=draw(st.sampled_from(["r1", "r2", "r3"])))
    if kind == "partition_delete":
        return Mutation(
            table="t", partition_key=(7,), partition_deleted_at=draw(times), audit=audit
        )
    if kind == "row_delete":
        return Mutation(
            table="t",
            partition_key=(7,),
            clustering_key=clustering,
            row_deleted_at=draw(times),
            audit=audit,
        )
    written = draw(st.dictionaries(st.sampled_from(COLUMNS), cells, min_size=1))
    liveness = None
    if kind == "insert":
        liveness = Cell(value=True, write_time=draw(times))
    return Mutation(
        table="t",
        partition_key=(7,),
        clustering_key=clustering,
        cells=written,
        liveness=liveness,
        audit=audit,
    )


def run_with_file_size_limit(code: str, limit_bytes: int) -> subprocess.CompletedProcess[str]:
    """Run `code` in a new Python whose files cannot grow past `limit_bytes`: a full disk.

    The write past the limit fails with EFBIG (SIGXFSZ is ignored), a real failure of the
    file system call, as ENOSPC would be.
    """
    limit = (
        "import resource, signal\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit_bytes}, {limit_bytes}))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", limit + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def history_of(
    schema: TableSchema,
    *,
    retired: Collection[str] = (),
    former_types: Mapping[str, Sequence[ColumnType]] | None = None,
    old_key_ids: Collection[int] = (),
) -> SchemaHistory:
    """The history `SchemaRegistry.history` gives a table whose current version is `schema`.

    What its older versions had is given as the registry derives it from them: the columns
    `retired`, the `former_types` of retyped columns and the `old_key_ids` of versions keyed
    otherwise.
    """
    return SchemaHistory(
        current=accepted_versions(schema)[0],
        retired=frozenset(retired),
        former_types={name: tuple(types) for name, types in (former_types or {}).items()},
        old_key_ids=frozenset(old_key_ids),
    )


def apply_as_m(
    sink: SqlChangeSink,
    batch_id: int,
    messages: Sequence[ChangeMessage],
    history: SchemaHistory,
    *,
    query_id: str,
    target_table: str,
) -> ChangeBatchReceipt:
    """Apply `messages` as batch `batch_id` of the materializer "m" of the sink contract tests."""
    return sink.apply_batch(
        materializer="m",
        query_id=query_id,
        batch_id=batch_id,
        target_table=target_table,
        messages=MessageRows.from_messages(messages),
        history=history,
    )


def keyed_message(
    table: str,
    op: ChangeOp,
    key: int,
    before: Row | None,
    after: Row | None,
    *,
    schema_id: int | None,
    at: int,
) -> ChangeMessage:
    """A message of the row of `table` whose one key column is `key`, written at `at` (its
    audit position too)."""
    return ChangeMessage(
        table=table,
        op=op,
        key=(key,),
        before=before,
        after=after,
        schema_id=schema_id,
        write_time=at,
        audit=Audit(source="test", position=at),
    )


def row_message(
    op: ChangeOp,
    schema: TableSchema,
    row: Mapping[str, Any],
    *,
    table: str,
    before: bool = False,
    schema_id: int = 1,
) -> ChangeMessage:
    """A message of `table` carrying `row` (missing columns null) in `schema`.

    Its before-image is the row too for a delete, or when `before` says so (an update that
    names its previous row).
    """
    full = {name: row.get(name) for name in schema.names}
    return ChangeMessage(
        table=table,
        op=op,
        key=tuple(full[k] for k in schema.primary_key),
        before=full if before or op is ChangeOp.DELETE else None,
        after=None if op is ChangeOp.DELETE else full,
        schema_id=schema_id,
        write_time=1,
        audit=Audit(source="test", position=1),
    )


def apply_in_schema(
    sink: SqlChangeSink,
    batch_id: int,
    messages: Sequence[ChangeMessage],
    schema: TableSchema,
    former_types: Mapping[str, Sequence[ColumnType]] | None = None,
    old_key_ids: Collection[int] = (),
    *,
    query_id: str,
    target_table: str,
) -> ChangeBatchReceipt:
    """`apply_as_m` with the history of a table whose current version is `schema`."""
    history = history_of(schema, former_types=former_types, old_key_ids=old_key_ids)
    return apply_as_m(
        sink, batch_id, messages, history, query_id=query_id, target_table=target_table
    )
