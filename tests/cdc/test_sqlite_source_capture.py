"""The capture loop over SQLite capture by triggers: it publishes then advances, names the
schema a change was written under, reports its totals, and waits for a full window or the flush
interval.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from ordo.cdc import Publisher, SchemaRegistry
from ordo.cdc.capture import Capture, CaptureTotals, PublishedWindow
from ordo.cdc.change import mutation_problems
from ordo.clock import ManualClock
from ordo.errors import IncompatibleSchemaError
from ordo.settings import CaptureSettings
from ordo.storage.open import stores_at
from ordo.storage.parquet import ParquetChangeLog
from ordo.storage.sqlite.change_source import SQLiteChangeSource
from sqlite_support import run_sql


def test_the_capture_loop_publishes_then_advances_and_stops_on_an_incompatible_change(
    source: SQLiteChangeSource, database: Path, tmp_path: Path
) -> None:
    run_sql(database, *(f"INSERT INTO users (id, name) VALUES ({i}, 'u{i}')" for i in range(5)))
    log = ParquetChangeLog(tmp_path / "log")
    with stores_at(f"sqlite:///{tmp_path / 'ordo.db'}") as stores:
        capture = Capture(source, Publisher(log, partitions=2), SchemaRegistry(stores.schemas))
        totals = capture.run(until_idle=True)
        assert totals.published == {"users": 5}
        assert source.status().retained_changes == 0
        assert {m.schema_id for m in log.read("users")} == {1}

        run_sql(database, "ALTER TABLE users ADD COLUMN note TEXT")
        source.schemas()  # triggers follow the new column (writes before this would miss it)
        run_sql(database, "INSERT INTO users (id, name, note) VALUES (9, 'n', 'hi')")
        capture.run(until_idle=True)
        newest = [m for m in log.read("users") if m.partition_key == (9,)]
        assert newest[0].cells["note"].value == "hi"
        current = SchemaRegistry(stores.schemas).current("users")
        assert (current.version, newest[0].schema_id) == (2, current.schema_id)

        run_sql(
            database,
            "ALTER TABLE users RENAME COLUMN score TO points",
            "INSERT INTO users (id, name) VALUES (10, 'x')",
        )
        with pytest.raises(IncompatibleSchemaError, match="'score' dropped"):
            capture.run(until_idle=True)
        assert source.status().retained_changes == 1  # nothing advanced


def test_changes_written_before_an_accepted_incompatible_change_name_the_older_schema(
    source: SQLiteChangeSource, database: Path, tmp_path: Path
) -> None:
    """They fit only the version they were written under: named with the newer one, the
    materializer dead-lettered them."""
    run_sql(database, "INSERT INTO users (id, name) VALUES (1, 'a')")
    log = ParquetChangeLog(tmp_path / "log")
    with stores_at(f"sqlite:///{tmp_path / 'ordo.db'}") as stores:
        registry = SchemaRegistry(stores.schemas)
        capture = Capture(source, Publisher(log, partitions=2), registry)
        capture.run(until_idle=True)
        # SQLite rewrites the triggers' column references, not the names they log the row by.
        run_sql(
            database,
            "ALTER TABLE users RENAME COLUMN score TO points",
            "INSERT INTO users (id, name, points) VALUES (2, 'b', 1.5)",
        )
        with pytest.raises(IncompatibleSchemaError):
            capture.run(until_idle=True)
        registry.accept("users", 2)
        capture.run(until_idle=True)
        run_sql(database, "INSERT INTO users (id, name, points) VALUES (3, 'c', 2.5)")
        capture.run(until_idle=True)
        first, second = registry.versions("users")

    logged = {m.partition_key: m for m in log.read("users")}
    assert logged[(2,)].cells["score"].value == 1.5
    assert logged[(3,)].cells["points"].value == 2.5
    assert [logged[(i,)].schema_id for i in (1, 2, 3)] == [
        first.schema_id,
        first.schema_id,
        second.schema_id,
    ]
    for version, key in ((first, (2,)), (second, (3,))):
        assert mutation_problems(logged[key], version.schema) == []


def test_snapshot_rows_name_the_schema_they_were_read_with(
    source: SQLiteChangeSource, database: Path, tmp_path: Path
) -> None:
    run_sql(database, "INSERT INTO users (id, name) VALUES (1, 'a')")
    log = ParquetChangeLog(tmp_path / "log")
    with stores_at(f"sqlite:///{tmp_path / 'ordo.db'}") as stores:
        registry = SchemaRegistry(stores.schemas)
        Capture(source, Publisher(log, partitions=2), registry).publish_snapshot("users")
        current = registry.current("users")

    [row] = log.read("users")
    assert (row.audit.is_snapshot, row.schema_id) == (True, current.schema_id)


def test_a_capture_reports_its_running_totals_after_each_window_it_publishes(
    source: SQLiteChangeSource, database: Path, tmp_path: Path
) -> None:
    run_sql(database, *(f"INSERT INTO users (id, name) VALUES ({i}, 'u{i}')" for i in range(5)))
    settings = CaptureSettings(max_changes=2)
    seen: list[tuple[int, int | None]] = []
    with stores_at(f"sqlite:///{tmp_path / 'ordo.db'}") as stores:
        capture = Capture(
            source,
            Publisher(ParquetChangeLog(tmp_path / "log"), partitions=2),
            SchemaRegistry(stores.schemas),
            settings=settings,
        )
        totals = capture.run(
            until_idle=True, on_publish=lambda t: seen.append((t.published["users"], t.up_to))
        )

    assert [published for published, _ in seen] == [2, 4, 5]
    assert seen[-1][1] == totals.up_to


def test_a_partial_window_waits_for_the_flush_interval_and_a_full_one_does_not(
    source: SQLiteChangeSource, database: Path, tmp_path: Path
) -> None:
    clock = ManualClock(0)
    settings = CaptureSettings(max_changes=3, flush_interval=timedelta(seconds=1))
    log = ParquetChangeLog(tmp_path / "log")
    with stores_at(f"sqlite:///{tmp_path / 'ordo.db'}") as stores:
        capture = Capture(
            source, Publisher(log), SchemaRegistry(stores.schemas), settings=settings, clock=clock
        )
        totals = CaptureTotals()
        run_sql(database, "INSERT INTO users (id, name) VALUES (1, 'a')")
        assert capture.capture_once(totals) is None  # partial, the interval has not passed
        clock.advance(999_000_000)
        assert capture.capture_once(totals) is None
        clock.advance(1_000_000)
        assert capture.capture_once(totals) == PublishedWindow(size=1, has_more=False)
        run_sql(database, *(f"INSERT INTO users (id, name) VALUES ({i}, 'b')" for i in range(2, 5)))
        # a full window goes at once (the limit reached: the source may hold more)
        assert capture.capture_once(totals) == PublishedWindow(size=3, has_more=True)
    assert totals.published == {"users": 4}
    assert source.status().retained_changes == 0
