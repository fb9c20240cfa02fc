"""Change messages and dead letters as rows of `MATERIALIZER_OUTPUT_DDL`.

The stateful step (executors) turns its results into rows with `message_rows` and
`dead_letter_row`; the sink (driver, `change_sink`) reads them back. Rows are plain tuples in
`OUTPUT_COLUMNS` order; JSON is compact, rows keep the schema's column order. No pyarrow here:
Spark imports this module in the process that plans each stateful query.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ordo.cdc.change import ChangeMessage
from ordo.cdc.json_text import compact_json
from ordo.cdc.materializer import RejectedMutation
from ordo.cdc.message_rows import MESSAGE_ROW_COLUMNS, fold_message_values
from ordo.cdc.mutation_json import mutation_to_json

OUTPUT_COLUMNS = (
    "partition_key",
    "ordinal",
    *MESSAGE_ROW_COLUMNS,
    "captured_at_us",
    "dead_letter_reason",
    "mutation_json",
)
"""The column names of `MATERIALIZER_OUTPUT_DDL`, in order."""

MESSAGE_COLUMNS = OUTPUT_COLUMNS[1:14]
"""The columns of a message in the messages' Parquet files (`ordinal` numbers the batch)."""

OutputRow = tuple[Any, ...]


def message_rows(partition_key: str, messages: Sequence[ChangeMessage]) -> list[OutputRow]:
    """One partition key's messages of a batch, in fold order; `ordinal` numbers them."""
    return [
        (partition_key, ordinal, *values, message.audit.captured_at_us, None, None)
        for ordinal, (message, values) in enumerate(
            zip(messages, fold_message_values(messages), strict=True)
        )
    ]


def dead_letter_row(partition_key: str, rejected: RejectedMutation) -> OutputRow:
    """A mutation that was not folded, with the reason."""
    mutation, audit = rejected.mutation, rejected.mutation.audit
    return (
        partition_key,
        None,
        mutation.table,
        None,
        compact_json(list(mutation.primary_key)),
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
        compact_json(mutation_to_json(mutation)),
    )


def unreadable_row(partition_key: str, row: Mapping[str, object], reason: str) -> OutputRow:
    """A change log row that is not a valid mutation: kept as it was read."""
    return (
        partition_key,
        None,
        row.get("table"),
        *([None] * 11),
        reason,
        compact_json(dict(row)),
    )
