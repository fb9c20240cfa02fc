"""The CDC materializer on Spark: a table's change log in, full-row change messages out.

`materialize(...)` streams the table's Parquet change log with Spark's file stream source,
folds each partition key's mutations with `transformWithStateInPandas` (state per key in
RocksDB, see `change_processor`), and hands every micro-batch to `change_sink.apply_batch`,
which stores the messages and the materialized table in the sink database in one transaction
with the batch id and the streaming query's id. A restart from the checkpoint continues with the
state and applies nothing twice; a run of the materializer from another checkpoint, which would
number its batches from 0 again and fold from empty state, is refused.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import col, lit, pmod, xxhash64
from pyspark.sql.streaming.query import StreamingQuery

from ordo import arguments
from ordo.errors import ConfigurationError, UnknownSchemaError
from ordo.spark.change_processor import (
    BIGINT_COLUMNS,
    INPUT_COLUMNS,
    STATE_BUCKETS,
    ChangeFoldProcessor,
)
from ordo.spark.change_schemas import CHANGE_LOG_DDL, MATERIALIZER_OUTPUT_DDL
from ordo.spark.change_sink import apply_batch
from ordo.spark.checkpoint import checkpoint_query_id, local_checkpoint_path, next_batch
from ordo.spark.query_arguments import check_query_arguments
from ordo.spark.register import ROCKSDB_STATE_STORE
from ordo.storage.location import redacted_url
from ordo.storage.migration import ordo_table_names
from ordo.storage.open import stores_at
from ordo.storage.parquet.file_name import checked_table_name

_PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"


@dataclass(frozen=True, slots=True, kw_only=True)
class MaterializerSpec:
    """What a materializer reads and where it writes; picklable (it travels to the executors).

    `name` identifies the materializer in the sink's `cdc_messages` and
    `cdc_materializer_progress` (one name per checkpoint: the progress records the checkpoint's
    query, and another checkpoint is refused). `change_log` is the root of the Parquet change
    logs (the table's log is `<change_log>/<table>`); `sink` is the SQLite or PostgreSQL URL
    holding the schema registry, the messages, the progress and `target_table` (default
    `<table>_materialized`, whatever the name). `messages_path` and `dead_letters_path`
    are local directories that get one Parquet directory per batch id (`batch_id=<n>`);
    dead letters default to `<checkpoint>/dead_letters`.
    """

    name: str
    table: str
    change_log: str
    sink: str
    messages_path: str | None = None
    target_table: str = ""
    dead_letters_path: str | None = None

    def __post_init__(self) -> None:
        for field in ("name", "table", "change_log", "sink"):
            if not getattr(self, field):
                msg = f"MaterializerSpec.{field} must not be empty"
                raise ConfigurationError(msg)
        checked_table_name(self.table)
        if not self.target_table:
            object.__setattr__(self, "target_table", f"{self.table}_materialized")
        if self.target_table.lower() in ordo_table_names():
            # The sink adopts a target table that exists (adds the schema's columns, upserts
            # its rows): one of ordo's own would be altered under the journal.
            msg = (
                f"target table {self.target_table!r} is one of ordo's own tables in the sink; "
                f"name another (the default is {self.table}_materialized)"
            )
            raise ConfigurationError(msg)

    def dead_letters_at(self, checkpoint: str) -> str:
        """Where the dead letters go: `dead_letters_path`, else `<checkpoint>/dead_letters`."""
        return self.dead_letters_path or f"{checkpoint.rstrip('/')}/dead_letters"

    @property
    def change_log_path(self) -> str:
        """The directory of the table's change log (what the file stream source lists)."""
        return f"{self.change_log.rstrip('/')}/{self.table}"


def materialize(
    spark: SparkSession,
    spec: MaterializerSpec,
    *,
    checkpoint: str,
    available_now: bool = False,
    processing_time: str | None = None,
) -> StreamingQuery:
    """Start the materializer's streaming query (call on the driver; returns at once).

    `available_now` processes what the change log holds and stops; `processing_time` (e.g.
    "10 seconds") sets the trigger interval of a continuous run. Raises ConfigurationError when
    the session's state store is not RocksDB, UnknownSchemaError as `require_schema` does, and
    MaterializerCheckpointError as `require_checkpoint` does. Creates or upgrades the sink's
    schema, once the arguments are checked (`check_query_arguments`, and a `spec` that is no
    MaterializerSpec is a ConfigurationError too).
    """
    check_query_arguments(
        spark, checkpoint=checkpoint, available_now=available_now, processing_time=processing_time
    )
    arguments.instance(spec, MaterializerSpec, name="spec", error=ConfigurationError)
    provider = spark.conf.get(_PROVIDER_KEY, None)
    if provider != ROCKSDB_STATE_STORE:
        msg = (
            f"the CDC materializer keeps its state with transformWithState, which needs "
            f"{_PROVIDER_KEY}={ROCKSDB_STATE_STORE} (got {provider}); set it before the "
            "query's first run (ordo.spark.start_session does), it cannot change afterwards"
        )
        raise ConfigurationError(msg)
    require_schema(spec)
    require_checkpoint(spec, checkpoint)
    if "://" not in spec.change_log:  # a local log: the capture may not have written yet
        Path(spec.change_log_path).mkdir(parents=True, exist_ok=True)
    # A file listed for a batch may be gone when the batch reads it, or when it is replayed:
    # `ordo cdc compact` removes files once a merged file holding their rows is in place, which
    # the source lists as a new file (ordo.storage.parquet.compaction). Without this the batch
    # failed, and so did every restart, replaying it.
    source = spark.readStream.schema(CHANGE_LOG_DDL).option("ignoreMissingFiles", "true")
    changes = (
        bucketed(source.parquet(spec.change_log_path))
        .groupBy("state_bucket")
        .transformWithStateInPandas(
            ChangeFoldProcessor(sink=spec.sink, table=spec.table),
            MATERIALIZER_OUTPUT_DDL,
            "Append",
            "None",
        )
    )
    dead_letters = spec.dead_letters_at(checkpoint)
    writer = changes.writeStream.foreachBatch(partial(apply_batch, spec, dead_letters)).option(
        "checkpointLocation", checkpoint
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    elif processing_time is not None:
        writer = writer.trigger(processingTime=processing_time)
    return writer.queryName(spec.name).start()


def require_schema(spec: MaterializerSpec) -> None:
    """UnknownSchemaError when the sink's registry has no schema for the spec's table.

    A misspelt table, or one neither captured nor declared yet: every change would be rejected.
    `ordo cdc materialize` asks before it starts Spark. Creates or upgrades the sink's schema.
    The sink is named without a PostgreSQL URL's password (`redacted_url`).
    """
    with stores_at(spec.sink) as stores:
        if not stores.schemas.versions(spec.table):
            msg = (  # ingestion needs the schema too: it cannot come first
                f"no schema is registered for table {spec.table!r} in {redacted_url(spec.sink)}: "
                "capture the table (`ordo cdc capture` registers its schema), or declare its "
                "schema (`ordo cdc schemas register`) and ingest its changes (`ordo cdc ingest`); "
                "or check the table's name"
            )
            raise UnknownSchemaError(msg)


def require_checkpoint(spec: MaterializerSpec, checkpoint: str) -> None:
    """MaterializerCheckpointError when the sink's progress of `spec.name` is another checkpoint's.

    The progress records the streaming query that applied the batches, and `checkpoint`'s
    query id is in its `metadata` file (a new checkpoint has none and gets a new id). A sink
    without progress of the name is refused too when the checkpoint committed batches (its
    `commits`): their changes are in its fold state and not in the sink; so is a sink whose
    progress is behind the checkpoint's last commit (restored from an older copy). Only a
    local checkpoint is read here. The sink checks the query of every batch it applies anyway;
    this spares starting a query that would fail at its first batch. `ordo cdc materialize`
    asks before it starts Spark.
    """
    local = local_checkpoint_path(checkpoint)
    if local is None:
        return
    query_id = checkpoint_query_id(local)
    with stores_at(spec.sink) as stores:
        stores.change_sink.require_checkpoint(spec.name, query_id, next_batch=next_batch(local))


def bucketed(change_log: DataFrame) -> DataFrame:
    """The change log's rows as the stateful step takes them.

    A `state_bucket` column, then INPUT_COLUMNS (BIGINTs as text: pandas would round them).
    """
    columns = [
        col(name).cast("string") if name in BIGINT_COLUMNS else col(name) for name in INPUT_COLUMNS
    ]
    bucket = pmod(xxhash64(col("partition_key")), lit(STATE_BUCKETS)).alias("state_bucket")
    return change_log.select(bucket, *columns)


def materialize_available(spark: SparkSession, spec: MaterializerSpec, *, checkpoint: str) -> float:
    """Materialize everything the change log holds now, then stop; the run's wall seconds.

    A failure of the query is raised here (StreamingQueryException, with Spark's message).
    """
    started = time.perf_counter()
    materialize(spark, spec, checkpoint=checkpoint, available_now=True).awaitTermination()
    return time.perf_counter() - started
