"""What the CDC tests share: the `users` table (id, name, age), and Hypothesis mutations."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import textwrap
from collections.abc import Collection, Mapping, Sequence

from hypothesis import strategies as st

from ordo.cdc import (
    Audit,
    Cell,
    ChangeMessage,
    Column,
    ColumnType,
    Mutation,
    SchemaVersion,
    TableSchema,
)
from ordo.cdc.message_rows import MessageRows
from ordo.cdc.schema_catalog import SchemaCatalog
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


RETYPED_VERSIONS = [
    SchemaVersion(
        schema_id=10 + number,
        table="t",
        version=number,
        schema=_retyped_schema(n),
        is_accepted=True,
        registered_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    )
    for number, n in enumerate([ColumnType.LONG, ColumnType.STRING], 1)
]
"""Table `t` (id, n, s): version 1 (schema id 11) types `n` long, version 2 (id 12, an
accepted retype) string."""
RETYPED = SchemaCatalog("t", lambda: RETYPED_VERSIONS)


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


def apply_as_m(
    sink: SqlChangeSink,
    batch_id: int,
    messages: Sequence[ChangeMessage],
    schema: TableSchema,
    *,
    query_id: str,
    target_table: str,
    retired: Collection[str] = (),
    former_types: Mapping[str, Sequence[ColumnType]] | None = None,
) -> ChangeBatchReceipt:
    """Apply `messages` as batch `batch_id` of the materializer "m" of the sink contract tests."""
    return sink.apply_batch(
        materializer="m",
        query_id=query_id,
        batch_id=batch_id,
        target_table=target_table,
        messages=MessageRows.from_messages(messages),
        schema=schema,
        retired=retired,
        former_types=former_types or {},
    )
