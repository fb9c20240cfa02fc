"""What the materializer's sink refuses before it writes anything of a batch.

`SqlChangeSink` applies a batch only where it continues what the sink holds: a batch of the
streaming query (so the checkpoint) that made the materializer's progress, either the batch
after the progress or a replay of one it covers (a query applies each of its batches, in
order, from 0), and keyed by the table's current key. These checks need no database; each
raises before the sink writes.
"""

from __future__ import annotations

import json
from collections.abc import Collection

from ordo.cdc.message_rows import MessageRows
from ordo.cdc.schema import TableSchema
from ordo.errors import MaterializerCheckpointError, OldKeyMessageError


def require_query(
    materializer: str, progress: tuple[int, str | None] | None, query_id: str | None, at_batch: int
) -> None:
    """MaterializerCheckpointError unless the query `query_id` may go on from `progress`.

    `progress` is the materializer's last batch id and the id of the query that applied it, as
    `SqlChangeSink.require_checkpoint` takes them; `at_batch` the batch the query applies next.
    Only the query that made the progress may go on (or any, from progress that records
    none), and only up to the batch after the progress; without progress only batch 0 may. A
    query numbers its batches from 0 and has each applied, so one further on had the batches
    in between applied elsewhere, or to this sink before it was restored from an older copy:
    its fold state holds their changes, which the sink's table and messages lack (see the
    error).
    """
    last, recorded = (-1, None) if progress is None else progress
    if progress is not None and (query_id is None or recorded not in (None, query_id)):
        raise MaterializerCheckpointError(
            materializer=materializer, batch_id=last, recorded=recorded, requested=query_id
        )
    if at_batch > last + 1:
        raise MaterializerCheckpointError(
            materializer=materializer,
            batch_id=None if progress is None else last,
            recorded=recorded,
            requested=query_id,
            checkpoint_batch=at_batch,
        )


def require_current_key(
    table: str, messages: MessageRows, schema: TableSchema, old_key_ids: Collection[int]
) -> None:
    """OldKeyMessageError for a message naming one of `old_key_ids`, versions keyed otherwise.

    A message written before an accepted key change (of a mutation naming an older version)
    names a row that the table, keyed by `schema`'s key, does not have: its key's values may
    even fit the new key's columns (`(id)` -> `(email)`), so the schema id decides, not the
    key's shape. Only the batch's distinct schema ids are compared; the key of the first
    message naming an old key's version is decoded for the error. No other schema id is
    refused: the materializer's messages name versions it resolved in the sink's registry
    before the batch's history was read, so the current one or an older accepted one.
    """
    schema_ids = messages.column("schema_id")
    if not old_key_ids or set(schema_ids).isdisjoint(old_key_ids):
        return
    ordinal = next(i for i, schema_id in enumerate(schema_ids) if schema_id in old_key_ids)
    raise OldKeyMessageError(
        table=table,
        key=tuple(json.loads(messages.column("key_json")[ordinal])),
        new_key=schema.primary_key,
        schema_id=schema_ids[ordinal],
    )
