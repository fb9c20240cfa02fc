"""Change messages and dead letters as rows of `MATERIALIZER_OUTPUT_DDL`, and back.

The stateful step (executors) turns its results into rows with `message_row` and
`dead_letter_row`; the sink (driver) turns them back with `messages_from_arrow`. Rows are plain
tuples in `OUTPUT_COLUMNS` order; JSON is compact, rows keep the schema's column order.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from ordo.cdc.change import ChangeMessage, ChangeOp
from ordo.cdc.materializer import RejectedMutation
from ordo.cdc.mutation import Audit
from ordo.cdc.mutation_json import mutation_to_json

OUTPUT_COLUMNS = (
    "partition_key",
    "ordinal",
    "table",
    "op",
    "key_json",
    "before_json",
    "after_json",
    "schema_id",
    "write_time",
    "source",
    "replica",
    "segment",
    "position",
    "captured_at_us",
    "dead_letter_reason",
    "mutation_json",
)
"""The column names of `MATERIALIZER_OUTPUT_DDL`, in order."""

MESSAGE_COLUMNS = OUTPUT_COLUMNS[1:14]
"""The columns of a message in the messages' Parquet files (`ordinal` numbers the batch)."""

OutputRow = tuple[Any, ...]


_json = json.JSONEncoder(separators=(",", ":")).encode
"""Compact JSON; one encoder for every call (json.dumps with arguments builds one each time)."""


def message_row(partition_key: str, ordinal: int, message: ChangeMessage) -> OutputRow:
    """One message; `ordinal` is its place among its partition key's messages in the batch."""
    audit = message.audit
    return (
        partition_key,
        ordinal,
        message.table,
        message.op.value,
        _json(list(message.key)),
        None if message.before is None else _json(message.before),
        None if message.after is None else _json(message.after),
        message.schema_id,
        message.write_time,
        audit.source,
        audit.replica,
        audit.segment,
        audit.position,
        audit.captured_at_us,
        None,
        None,
    )


def dead_letter_row(partition_key: str, rejected: RejectedMutation) -> OutputRow:
    """A mutation that was not folded, with the reason."""
    mutation, audit = rejected.mutation, rejected.mutation.audit
    return (
        partition_key,
        None,
        mutation.table,
        None,
        _json(list(mutation.primary_key)),
        None,
        None,
        mutation.schema_id,
        mutation.write_time,
        audit.source,
        audit.replica,
        audit.segment,
        audit.position,
        audit.captured_at_us,
        rejected.reason,
        _json(mutation_to_json(mutation)),
    )


def unreadable_row(partition_key: str, row: Mapping[str, object], reason: str) -> OutputRow:
    """A change log row that is not a valid mutation: kept as it was read."""
    return (
        partition_key,
        None,
        row.get("table"),
        *([None] * 11),
        reason,
        _json(dict(row)),
    )


def messages_from_arrow(rows: pa.Table) -> list[ChangeMessage]:
    """The messages of `message_row` rows that Spark collected to the driver, in row order."""
    ops = {op.value: op for op in ChangeOp}
    loads = json.loads
    columns = [rows.column(name).to_pylist() for name in MESSAGE_COLUMNS[1:]]
    return [
        ChangeMessage(
            table=table,
            op=ops[op],
            key=tuple(loads(key)),
            before=None if before is None else loads(before),
            after=None if after is None else loads(after),
            schema_id=schema_id,
            write_time=write_time,
            audit=Audit(
                source=source,
                replica=replica,
                segment=segment,
                position=position,
                captured_at_us=captured_at_us,
            ),
        )
        for (
            table,
            op,
            key,
            before,
            after,
            schema_id,
            write_time,
            source,
            replica,
            segment,
            position,
            captured_at_us,
        ) in zip(*columns, strict=True)
    ]
