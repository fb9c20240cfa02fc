"""The run of a bench script that measures on Spark: header, session, work folder, table.

Imported by the bench scripts; running it directly does nothing (`make bench` runs every
bench/*.py file).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import SparkSession

from _report import Row, machine_lines, print_table
from ordo.spark import start_session


def report_on_spark(name: str, measure: Callable[[SparkSession, Path], list[Row]]) -> None:
    """Print the machine header, `measure` in a local[2] session and an empty work folder (both
    gone after it, whatever it raised), then the table of its figures and the total time.

    The header comes first, so that a run that fails still says on what machine and versions.
    """
    started = time.perf_counter()
    print("\n".join(machine_lines(libraries=("ordo", "pyspark", "pyarrow"))))
    print(flush=True)
    spark = start_session(master="local[2]", app_name=f"ordo-bench-{name}")
    try:
        with tempfile.TemporaryDirectory(prefix=f"ordo-bench-{name}-") as work:
            figures = measure(spark, Path(work))
    finally:
        spark.stop()
    print_table(figures, unit_rule=40)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
