"""Change messages column by column, with keys and rows as JSON text: what a sink stores.

The materializer's stateful step emits messages as rows with JSON texts; the sink stores those
texts as they are and decodes only the `after` rows it applies to the materialized table. Going
through `ChangeMessage` objects instead decoded and re-encoded every key, `before` and `after`
(more than half of a micro-batch's time on the driver). `from_messages` builds the same rows
from objects, with the same compact JSON the stateful step writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ordo.cdc.change import ChangeMessage
from ordo.cdc.change_rows import ColumnRows
from ordo.cdc.json_text import compact_json

MESSAGE_ROW_COLUMNS = (
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
)
"""The columns of a stored message, in this order (`op` is a `ChangeOp` value)."""


def message_values(message: ChangeMessage) -> tuple[Any, ...]:
    """One message's values in MESSAGE_ROW_COLUMNS order (keys and rows as compact JSON)."""
    audit = message.audit
    return (
        message.table,
        message.op.value,
        compact_json(list(message.key)),
        None if message.before is None else compact_json(message.before),
        None if message.after is None else compact_json(message.after),
        message.schema_id,
        message.write_time,
        audit.source,
        audit.replica,
        audit.segment,
        audit.position,
    )


@dataclass(frozen=True, slots=True)
class MessageRows(ColumnRows):
    """A micro-batch's messages in emission order, one sequence per MESSAGE_ROW_COLUMNS."""

    NAMES = MESSAGE_ROW_COLUMNS

    @classmethod
    def from_messages(cls, messages: Sequence[ChangeMessage]) -> MessageRows:
        """The rows of `messages`, in their order."""
        return cls.of_rows([message_values(m) for m in messages])
