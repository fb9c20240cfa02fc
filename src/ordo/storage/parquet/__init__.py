"""The change log as partitioned Parquet files that Spark's file source reads as a stream."""

from ordo.storage.parquet.change_log import ChangeLogSummary, ParquetChangeLog
from ordo.storage.parquet.log_schema import CHANGE_LOG_COLUMNS

__all__ = ["CHANGE_LOG_COLUMNS", "ChangeLogSummary", "ParquetChangeLog"]
