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


@dataclass(frozen=True, slots=True)
class MessageRows(ColumnRows):
    """A micro-batch's messages in emission order, one sequence per MESSAGE_ROW_COLUMNS."""

    NAMES = MESSAGE_ROW_COLUMNS

    @classmethod
    def from_messages(cls, messages: Sequence[ChangeMessage]) -> MessageRows:
        """The rows of `messages`, in their order."""
        return cls.of_rows(
            [
                (
                    m.table,
                    m.op.value,
                    compact_json(list(m.key)),
                    None if m.before is None else compact_json(m.before),
                    None if m.after is None else compact_json(m.after),
                    m.schema_id,
                    m.write_time,
                    m.audit.source,
                    m.audit.replica,
                    m.audit.segment,
                    m.audit.position,
                )
                for m in messages
            ]
        )
