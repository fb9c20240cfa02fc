"""What importing the Spark source costs: Spark imports it in a fresh process for every query."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

import ordo.spark
from ordo import EventsByTagSettings, NewEvent, open_journal
from ordo.time import format_first_time_bucket

_LOADED = (
    "import sys, ordo.spark.events_by_tag_source; "
    "print(sorted(m for m in ('pandas', 'ordo.spark.materializer') if m in sys.modules))"
)


def test_the_source_loads_neither_the_materializer_nor_pandas() -> None:
    loaded = subprocess.run(
        [sys.executable, "-c", _LOADED], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "[]"


_PLANNED = """
import sys
from pyspark.sql.streaming.datasource import ReadAllAvailable
from ordo.spark.events_by_tag_source import EventsByTagStreamReader
from ordo.spark.options import EventsByTagOptions

options = {"journal": sys.argv[1], "tag": "order", "firstTimeBucket": sys.argv[2],
           "eventualConsistencyDelayMs": "0", "segments": "2"}
reader = EventsByTagStreamReader(EventsByTagOptions.from_spark(options))
reader.prepareForTriggerAvailableNow()
start = reader.initialOffset()
end = reader.latestOffset(start, ReadAllAvailable())
partitions = reader.partitions(start, end)
reader.stop()
unused = ("pandas", "ordo.cdc", "asyncio")
print(sum(len(p.pids) for p in partitions), *(m for m in unused if m in sys.modules))
"""


def test_planning_a_batch_loads_neither_pandas_nor_cdc_nor_asyncio(tmp_path: Path) -> None:
    """The source's process plans its first batch without importing what it does not use.

    pandas (~0.2 s there): pyarrow imports it, when installed, on the first `pa.array()` or
    `to_numpy()`; the planner's summarised pages call neither. ordo.cdc (~75 ms): the stores
    build their CDC stores on first use. asyncio (~30 ms): only the async queries import it.
    """
    url = f"sqlite:///{tmp_path / 'journal.db'}"
    first = format_first_time_bucket(time.time_ns() // 1_000_000 - 3_600_000)
    settings = EventsByTagSettings(first_time_bucket=first, flush_interval=timedelta(0))
    with open_journal(url, settings=settings) as journal:
        for i in range(30):
            journal.append(f"order-{i % 3}", [NewEvent.of({"i": i}, tags=["order"])])
    planned = subprocess.run(
        [sys.executable, "-c", _PLANNED, url, first], capture_output=True, text=True, check=True
    ).stdout
    assert planned.split() == ["3"]  # the 3 ids planned, and none of the unused modules


_PLANNING_LOADS = (
    "import sys, ordo.spark.change_processor; "
    "print(*(m for m in ('pandas', 'pyarrow', 'numpy', 'ordo.storage.open', 'ordo.query') "
    "if m in sys.modules))"
)


def test_the_materializer_stateful_step_loads_neither_pandas_nor_pyarrow_nor_the_stores() -> None:
    """Spark plans each run of the materializer in a fresh Python process that imports the
    step's module to call its `init`: pandas, pyarrow and the journal's stores cost ~0.5 s there."""
    loaded = subprocess.run(
        [sys.executable, "-c", _PLANNING_LOADS], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.split() == []


def test_the_package_names_resolve_on_first_use() -> None:
    import ordo
    from ordo.spark.projection import projection
    from ordo.spark.register import register, start_session
    from ordo.storage.open import open_journal

    # importing the submodules above did not make the functions named like them modules
    assert ordo.spark.projection is projection
    assert ordo.spark.register is register
    assert ordo.spark.start_session is start_session
    assert ordo.open_journal is open_journal
    assert set(ordo.__all__) <= set(dir(ordo)) | set(ordo._MODULES)
    with pytest.raises(AttributeError, match="module 'ordo' has no attribute 'nothing'"):
        ordo.nothing  # noqa: B018 - the attribute access is the test


def test_the_materializer_names_resolve_on_first_use() -> None:
    from ordo.spark.materializer import MaterializerSpec, materialize

    assert ordo.spark.materialize is materialize
    assert ordo.spark.MaterializerSpec is MaterializerSpec
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        ordo.spark.nothing  # noqa: B018 - the attribute access is the test
