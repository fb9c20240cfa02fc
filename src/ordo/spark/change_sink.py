"""The materializer's sink: each micro-batch's messages into the sink database, exactly once.

`apply_batch` is the query's `foreachBatch` function; it runs on the driver. It collects the
batch once (as Arrow) and applies the messages to the sink in one transaction with the batch id
and the query's id (`SqlChangeSink.apply_batch`), which skips a batch it already applied and
refuses a batch of another query (one run from another checkpoint). The materialized table
follows the table's schema history (its current accepted schema and what older versions had),
read for each batch: no message names a newer version, since the stateful step stops at one
still pending. Then it writes the messages and
dead letters as Parquet (one directory per batch id, replaced on a replay), so a refused batch
writes no file either, and a replayed batch writes its files again. A replayed batch carries the
same rows (the stateful step restarts from the state version of that batch), so the files it
rewrites are the same files.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from ordo.cdc.message_rows import MESSAGE_ROW_COLUMNS, MessageRows
from ordo.cdc.schema_registry import SchemaRegistry
from ordo.errors import CdcError
from ordo.spark.change_rows import MESSAGE_COLUMNS, OUTPUT_COLUMNS
from ordo.storage.open import stores_at
from ordo.storage.parquet.batch_files import replace_batch

if TYPE_CHECKING:
    from ordo.spark.materializer import MaterializerSpec

logger = logging.getLogger(__name__)

QUERY_ID_PROPERTY = "sql.streaming.queryId"
"""The local property of the driver's thread that names the streaming query of a batch (its
checkpoint's query id, kept in CHECKPOINT/metadata)."""

DEAD_LETTER_COLUMNS = (
    "partition_key",
    "table",
    "key_json",
    *OUTPUT_COLUMNS[OUTPUT_COLUMNS.index("schema_id") :],
)
"""The columns of the dead letters' Parquet files."""


def apply_batch(
    spec: MaterializerSpec, dead_letters_path: str, batch: DataFrame, batch_id: int
) -> None:
    """Store one micro-batch (driver; called by Spark with the batch and its id)."""
    rows = batch.toArrow()
    is_message = pc.is_null(rows.column("dead_letter_reason"))
    messages = rows.filter(is_message).sort_by(
        [("partition_key", "ascending"), ("ordinal", "ascending")]
    )
    rejected = rows.filter(pc.invert(is_message)).sort_by(
        [("partition_key", "ascending"), ("position", "ascending")]
    )
    query_id = batch.sparkSession.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
    if query_id is None:
        msg = f"materializer {spec.name!r}: Spark did not name the query of batch {batch_id}"
        raise CdcError(msg)
    changes = message_rows_from_arrow(messages)
    with stores_at(spec.sink, mode="write") as stores:
        receipt = stores.change_sink.apply_batch(
            materializer=spec.name,
            query_id=query_id,
            batch_id=batch_id,
            target_table=spec.target_table,
            messages=changes,
            history=SchemaRegistry(stores.schemas).history(spec.table),
        )
    if spec.messages_path is not None and messages.num_rows:
        numbered = messages.select(list(MESSAGE_COLUMNS)).set_column(
            0, "ordinal", pa.array(range(messages.num_rows), pa.int64())
        )
        replace_batch(spec.messages_path, batch_id, numbered)
    if rejected.num_rows:
        replace_batch(dead_letters_path, batch_id, rejected.select(list(DEAD_LETTER_COLUMNS)))
    logger.info(
        "materializer batch name=%s batch_id=%d applied=%s messages=%d dead_letters=%d",
        spec.name,
        batch_id,
        receipt.is_applied,
        len(changes),
        rejected.num_rows,
    )


def message_rows_from_arrow(rows: pa.Table) -> MessageRows:
    """The messages of `message_rows` rows that Spark collected to the driver, in row order.

    Their JSON texts stay texts: the sink stores them as they are.
    """
    return MessageRows({name: rows.column(name).to_pylist() for name in MESSAGE_ROW_COLUMNS})
