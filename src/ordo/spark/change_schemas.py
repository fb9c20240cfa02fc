"""The CDC materializer's row shapes in Spark, as DDL strings.

The change log it reads, its state and what its stateful step emits.
"""

from __future__ import annotations

from ordo.cdc.change_rows import CHANGE_ROW_COLUMNS, CHANGE_ROW_TEXT_COLUMNS

CHANGE_LOG_DDL = ", ".join(
    [
        *(
            f"`{name}` {'STRING' if name in CHANGE_ROW_TEXT_COLUMNS else 'BIGINT'}"
            for name in (*CHANGE_ROW_COLUMNS, "published_at_us")
        ),
        "`partition` INT",
    ]
)
"""A table's Parquet change log as Spark's file stream source reads it: the columns of
`ordo.storage.parquet.log_schema.CHANGE_LOG_SCHEMA` (see `ordo.cdc.change_rows`) plus
`partition`, which comes from the `partition=<n>` directory names."""

MATERIALIZER_BUCKET_DDL = "keys BIGINT, depth INT"
"""The materializer's value state per bucket: partition keys held, and the slot depth."""

MATERIALIZER_SLOT_KEY_DDL = "slot INT"
"""The materializer's map state key: a slot of a bucket (see `ordo.spark.bucket_state`)."""

MATERIALIZER_SLOT_DDL = "states STRING"
"""The materializer's map state value: a JSON object from partition key (JSON text) to that
key's encoded PartitionState (`ordo.cdc.state_json`)."""

MATERIALIZER_OUTPUT_DDL = (
    "partition_key STRING, ordinal INT, `table` STRING, op STRING, key_json STRING, "
    "before_json STRING, after_json STRING, schema_id BIGINT, write_time BIGINT, "
    "source STRING, replica STRING, segment STRING, position BIGINT, captured_at_us BIGINT, "
    "dead_letter_reason STRING, mutation_json STRING"
)
"""What the materializer's stateful step emits: a change message when `dead_letter_reason` is
null (`ordinal` orders the messages of one partition key within a micro-batch; rows are JSON
objects in schema column order), otherwise a rejected mutation (`mutation_json` in the mutation
JSON format, or the raw change log row when it could not be read)."""
