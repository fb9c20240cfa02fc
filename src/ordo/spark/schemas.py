"""The rows ordo's events-by-tag source produces, as a Spark DDL string.

The CDC materializer's row shapes are apart, in change_schemas.py: the process Spark starts for
every streaming query's source imports this module, and must not load ordo.cdc for it.
"""

from __future__ import annotations

EVENT_ROW_DDL = (
    "offset STRING, timestamp TIMESTAMP, persistence_id STRING, sequence_nr BIGINT, "
    "tag_pid_sequence_nr BIGINT, segment STRING, tags STRING, manifest STRING, "
    "serializer STRING, payload BINARY, metadata STRING"
)
"""One event of a tag: `offset` is its TimeUUID (resume after it), `segment` the
`id/mask` of the input partition that read it, `tags` a JSON object tag -> tag pid sequence nr,
`serializer` how `payload` is stored ("json": UTF-8 JSON, "bytes": as given), `metadata` JSON
or null."""
