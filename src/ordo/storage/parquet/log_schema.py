"""The one layout of every change log file, whatever the table: CHANGE_LOG_SCHEMA."""

from __future__ import annotations

import time

import pyarrow as pa

from ordo.cdc.change_rows import CHANGE_ROW_COLUMNS, CHANGE_ROW_TEXT_COLUMNS, ChangeRows
from ordo.storage.parquet.arrow_columns import int64_array, string_array

CHANGE_LOG_SCHEMA = pa.schema(
    (name, pa.string() if name in CHANGE_ROW_TEXT_COLUMNS else pa.int64())
    for name in (*CHANGE_ROW_COLUMNS, "published_at_us")
)
"""One row per single-row mutation (`ordo.cdc.change_rows`): keys and cells are JSON text, so one
layout serves every table; the `partition` column comes from the directory name. Files written
before `cell_values` existed lack its two columns; readers take them as null."""

CHANGE_LOG_COLUMNS = tuple(CHANGE_LOG_SCHEMA.names)


def log_table(rows: ChangeRows) -> pa.Table:
    """The rows as a CHANGE_LOG_SCHEMA table, stamped with the time of publishing.

    Built without `pa.array`, whose look for pandas imports it (`arrow_columns`).
    """
    published_at_us = time.time_ns() // 1000
    arrays = [
        (string_array if name in CHANGE_ROW_TEXT_COLUMNS else int64_array)(rows.column(name))
        for name in CHANGE_ROW_COLUMNS
    ]
    arrays.append(int64_array([published_at_us] * len(rows)))
    return pa.Table.from_arrays(arrays, schema=CHANGE_LOG_SCHEMA)
