"""A Spark driver running the CDC materializer every 100 ms, for the kill-and-restart test.

python materializer_driver.py SINK_URL CHANGE_LOG CHECKPOINT MESSAGES [KILL_AT]

Without KILL_AT it runs until killed from outside. KILL_AT makes it kill itself (SIGKILL) at
a point an outside kill rarely hits: `applied`, right after the sink committed a batch it
applied (before the batch's Parquet files and Spark's commit of the batch); `table`, inside the
sink's transaction right after the materialized table followed the schema (a retype: before
the batch's rows are written and the transaction commits).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from ordo.spark import MaterializerSpec, materialize, start_session
from ordo.storage.sql_change_sink import SqlChangeSink
from ordo.storage.sql_materialized_table import SqlMaterializedTable


def _kill_after(owner: type, method: str, when: Callable[[Any], bool]) -> None:
    """Make `owner.method` kill this process once it returned a result `when` accepts."""
    original = getattr(owner, method)

    def killing(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        if when(result):
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(owner, method, killing)


def main() -> None:
    sink, change_log, checkpoint, messages, *kill_at = sys.argv[1:]
    if kill_at == ["applied"]:
        _kill_after(SqlChangeSink, "apply_batch", lambda receipt: bool(receipt.is_applied))
    elif kill_at == ["table"]:
        _kill_after(SqlMaterializedTable, "_ensure_table", lambda _: True)
    spark = start_session(master="local[2]", app_name="ordo-test-materializer")
    spec = MaterializerSpec(
        name="killed", table="users", change_log=change_log, sink=sink, messages_path=messages
    )
    query = materialize(spark, spec, checkpoint=checkpoint, processing_time="100 milliseconds")
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
