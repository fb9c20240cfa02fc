"""The CDC messages the sink stored (`cdc_messages` rows), read back as messages."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ordo.cdc.change import ChangeMessage, ChangeOp
from ordo.cdc.message_rows import MESSAGE_ROW_COLUMNS
from ordo.cdc.mutation import Audit
from ordo.journal.serialization import stored_json

MESSAGE_COLUMNS = ", ".join(
    ["materializer", "batch_id", "ordinal"]
    + ["table_name" if name == "table" else name for name in MESSAGE_ROW_COLUMNS]
)
"""The stored columns: the batch's place, then MESSAGE_ROW_COLUMNS in their order."""


def stored_message(row: Sequence[Any]) -> ChangeMessage:
    """The message of a `cdc_messages` row (MESSAGE_COLUMNS, in order).

    A key, `before` or `after` that is no JSON any more (the row changed by hand or by
    another program) is StorageIntegrityError naming the row by its materializer, batch and
    ordinal, and the column (`stored_json`): json's bare error named none.
    """
    of = f"message {row[2]} of batch {row[1]} of materializer {row[0]!r}"
    before, after = row[6], row[7]
    return ChangeMessage(
        table=str(row[3]),
        op=ChangeOp(row[4]),
        key=tuple(stored_json(row[5], what="key_json", of=of)),
        before=None if before is None else stored_json(before, what="before_json", of=of),
        after=None if after is None else stored_json(after, what="after_json", of=of),
        schema_id=None if row[8] is None else int(row[8]),
        write_time=int(row[9]),
        audit=Audit(
            source=str(row[10]),
            replica=str(row[11]),
            segment=str(row[12]),
            position=int(row[13]),
        ),
    )
