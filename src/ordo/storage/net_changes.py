"""A batch's messages as the materialized table takes them: per key, one delete and one upsert.

The sink applies a micro-batch's net effect rather than each message in turn: a key's
messages collapse to whether the batch deletes the row first and which values it upserts then
(`net_changes`), so a key updated many times in a batch is written once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter

from ordo.cdc.change import ChangeOp
from ordo.cdc.message_rows import MessageRows
from ordo.cdc.mutation import JsonValue


@dataclass(slots=True)
class NetChange:
    """The net effect of one key's messages in a batch: delete first?, then upsert these values."""

    is_deleted: bool = False
    values: dict[str, JsonValue] | None = None


_decode_row = json.JSONDecoder().raw_decode
"""Decodes an `after` text, which is ordo's compact JSON (`message_values`, the stateful step):
about half the cost of json.loads, which looks for whitespace around it too."""


def net_changes(messages: MessageRows) -> dict[str, NetChange]:
    """Per key (its JSON text), what applying the messages one by one does, as one delete+upsert.

    An upsert writes the columns of its `after` row and leaves the others as they are, so the
    columns of consecutive upserts merge, a later one's winning; a delete wipes what came
    before. Every `after` is a full row of its message's schema version (`full_row`), so of a
    key's upserts since its last delete, one that a later upsert of the same schema id follows
    writes nothing the later one does not overwrite. Only the last upsert of each schema id
    is decoded, and they merge in their order: one `after` per key, unless the table's schema
    changed within the batch. A message naming no schema id counts alone.
    """
    keys, afters = messages.column("key_json"), messages.column("after_json")
    schema_ids: Sequence[object] = messages.column("schema_id")
    if None in schema_ids:
        schema_ids = [object() if schema_id is None else schema_id for schema_id in schema_ids]
    delete = ChangeOp.DELETE.value
    last_delete = {
        key: ordinal
        for ordinal, (key, op, after) in enumerate(
            zip(keys, messages.column("op"), afters, strict=True)
        )
        if op == delete or after is None
    }
    changes = {key: NetChange(is_deleted=True) for key in last_delete}
    # per key and schema id, its last message: a delete's precedes the key's last delete or is it
    last_messages = dict(zip(zip(keys, schema_ids, strict=True), range(len(keys)), strict=True))
    for (key, _), ordinal in sorted(last_messages.items(), key=itemgetter(1)):
        if ordinal > last_delete.get(key, -1):
            values = _decode_row(afters[ordinal])[0]
            change = changes.get(key)
            if change is None:
                changes[key] = NetChange(values=values)
            elif change.values is None:
                change.values = values
            else:
                change.values.update(values)
    return changes
