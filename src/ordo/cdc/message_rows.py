"""Change messages column by column, with keys and rows as JSON text: what a sink stores.

The materializer's stateful step emits messages as rows with JSON texts; the sink stores those
texts as they are and decodes only the `after` rows it applies to the materialized table. Going
through `ChangeMessage` objects instead decoded and re-encoded every key, `before` and `after`
(more than half of a micro-batch's time on the driver). `from_messages` builds the same rows
from objects, with the same compact JSON the stateful step writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ordo.cdc.change import ChangeMessage
from ordo.cdc.change_rows import require_columns
from ordo.cdc.json_text import compact_json

MESSAGE_ROW_COLUMNS = (
    "table",
    "key_json",
    "op",
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
class MessageRows:
    """A micro-batch's messages in emission order, one sequence per MESSAGE_ROW_COLUMNS."""

    columns: Mapping[str, Sequence[Any]]

    def __post_init__(self) -> None:
        require_columns(self.columns, MESSAGE_ROW_COLUMNS, "message rows")

    @classmethod
    def from_messages(cls, messages: Sequence[ChangeMessage]) -> MessageRows:
        """The rows of `messages`, in their order."""
        rows = [
            (
                m.table,
                compact_json(list(m.key)),
                m.op.value,
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
        transposed = zip(*rows, strict=True) if rows else ((),) * len(MESSAGE_ROW_COLUMNS)
        return cls(dict(zip(MESSAGE_ROW_COLUMNS, map(list, transposed), strict=True)))

    def __len__(self) -> int:
        return len(self.columns["op"])

    def column(self, name: str) -> Sequence[Any]:
        """One column's values (KeyError for a name not in MESSAGE_ROW_COLUMNS)."""
        return self.columns[name]
