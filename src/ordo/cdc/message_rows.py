"""Change messages column by column, with keys and rows as JSON text: what a sink stores.

The materializer's stateful step emits messages as rows with JSON texts; the sink stores those
texts as they are and decodes only the `after` rows it applies to the materialized table. Going
through `ChangeMessage` objects instead decoded and re-encoded every key, `before` and `after`
(more than half of a micro-batch's time on the driver). `from_messages` builds the same rows
from objects, with the same compact JSON the stateful step writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import is_
from typing import Any

from ordo.cdc.change import ChangeMessage, Row
from ordo.cdc.change_rows import ColumnRows
from ordo.cdc.json_text import compact_json
from ordo.cdc.mutation import Key

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
    before, after = message.before, message.after
    return _values(
        message,
        compact_json(list(message.key)),
        None if before is None else compact_json(before),
        None if after is None else compact_json(after),
    )


def fold_message_values(messages: Iterable[ChangeMessage]) -> Iterator[tuple[Any, ...]]:
    """`message_values` of one partition key's messages in fold order, encoding less.

    A row's next message repeats its key, and its `before` is the previous one's `after`
    (`PartitionFold.messages`): those texts are reused where the values are the same objects,
    and encoded where they are not. Identity, not equality: equal values can have other texts
    (1, 1.0 and True are equal, and so are 0.0 and -0.0), and a message's `before` can come out
    otherwise than the previous `after` (another schema version, or retyped columns).
    """
    held: dict[Key, tuple[Key, str, Row | None, str | None]] = {}
    for message in messages:
        key, before, after = message.key, message.before, message.after
        previous = held.get(key)
        if previous is None:
            key_json = compact_json(list(key))
            before_json = None if before is None else compact_json(before)
        else:
            held_key, key_json, held_after, held_after_json = previous
            if not _same_objects(held_key, key):  # equal keys, so of one length
                key_json = compact_json(list(key))
            if before is None:
                before_json = None
            elif held_after is not None and _same_row(held_after, before):
                before_json = held_after_json
            else:
                before_json = compact_json(before)
        after_json = None if after is None else compact_json(after)
        held[key] = (key, key_json, after, after_json)
        yield _values(message, key_json, before_json, after_json)


def _same_objects(a: Iterable[object], b: Iterable[object]) -> bool:
    """Whether `a` and `b` yield the very same objects, in order (given equal lengths)."""
    return all(map(is_, a, b))


def _same_row(a: Row, b: Row) -> bool:
    """Whether two rows hold the very same column names and values, in the same order."""
    return len(a) == len(b) and _same_objects(a, b) and _same_objects(a.values(), b.values())


def _values(
    message: ChangeMessage, key_json: str, before_json: str | None, after_json: str | None
) -> tuple[Any, ...]:
    """A message's values in MESSAGE_ROW_COLUMNS order, with its texts already encoded."""
    audit = message.audit
    return (
        message.table,
        message.op.value,
        key_json,
        before_json,
        after_json,
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
