"""Compacting a table's change log: merged runs, what the publisher reads back from them, the
hidden parts of each, a publish and a second compaction meanwhile, and what is refused."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from change_log_support import log_contents, mutation_of
from ordo.cdc import Mutation, Publisher, partition_of
from ordo.cdc.change_rows import ChangeRows
from ordo.errors import AlreadyRunningError, ConfigurationError, InvalidInputError
from ordo.storage.parquet import ParquetChangeLog
from ordo.storage.parquet.compaction import (
    COMPACTION_LOCK,
    STAGED_SUFFIX,
    compact_table,
    compaction_of,
    table_logs,
)
from ordo.storage.parquet.log_schema import CHANGE_LOG_SCHEMA, log_table
from ordo.storage.parquet.staged_parts import write_part

PARTITIONS = 2


def captured(key: int, position: int, segment: str = "slot") -> Mutation:
    """`mutation_of` with a capture time of its own, which the rewind check compares."""
    mutation = mutation_of(key=key, position=position, segment=segment)
    audit = dataclasses.replace(mutation.audit, captured_at_us=1_000 + position)
    return dataclasses.replace(mutation, audit=audit)


def publish_windows(log: ParquetChangeLog, windows: int, first: int = 1) -> list[Mutation]:
    """`windows` publishes of five keys in segment "slot" and two in "other", positions from
    `first`; their mutations."""
    published = []
    for window in range(windows):
        position = first + 10 * window
        mutations = [captured(k, position + k) for k in range(5)]
        mutations += [captured(k, position + 5 + k, segment="other") for k in range(2)]
        Publisher(log, partitions=PARTITIONS).publish(mutations)
        published += mutations
    return published


def rows_by_file(folder: Path) -> dict[str, list[dict[str, object]]]:
    """Each change log file of a partition folder with its rows, every column."""
    return {
        file.name: pq.read_table(file, schema=CHANGE_LOG_SCHEMA).to_pylist()
        for file in sorted(folder.glob("*.parquet"))
    }


def earlier_layout_file(folder: Path, position: int) -> None:
    """A file of segment "slot" at `position` as written before `cell_values` existed."""
    row = log_table(ChangeRows.from_mutations([captured(0, position)])).to_pylist()[0]
    del row["cell_values"], row["cell_values_time"]
    row["cells"] = json.dumps({"n": {"value": position, "write_time": position, "ttl_s": None}})
    earlier = pa.schema(f for f in CHANGE_LOG_SCHEMA if f.name in row)
    pq.write_table(
        pa.Table.from_pylist([row], schema=earlier), folder / f"slot-{position}-{position}.parquet"
    )


def positions_of(name: str) -> tuple[str, int, int]:
    """A positioned file name's segment token, lowest and highest position."""
    token, lowest, highest = name.removesuffix(".parquet").rsplit("-", 2)
    return token, int(lowest), int(highest)


def test_runs_become_files_of_their_rows_in_order_under_the_same_last_positions(
    tmp_path: Path,
) -> None:
    log = ParquetChangeLog(tmp_path)
    publish_windows(log, 12)
    home = partition_of((0,), PARTITIONS)
    folder = tmp_path / "users" / f"partition={home}"
    earlier_layout_file(folder, 200)
    big = [captured(0, p) for p in range(201, 213)]  # more rows than max_rows: kept whole
    log.append("users", [(home, ChangeRows.from_mutations(big))])
    Publisher(log).publish([mutation_of(key=0, position=0, segment="agent")] * 2)
    before = rows_by_file(folder)
    last = {(s, p): log.last_position("users", s, p) for s in ("slot", "other") for p in (0, 1)}
    files, rows = len(log.files("users")), len(list(log.read("users")))

    receipt = compact_table(log, "users", max_rows=10)

    after = rows_by_file(folder)
    merged = [name for name in after if name not in before]
    assert len(merged) > 2  # each holds the rows of the files it replaced, in their order:
    for name in merged:
        token, lowest, highest = positions_of(name)
        replaced = [
            before[old]
            for old in sorted(before.keys() - after.keys(), key=lambda old: positions_of(old)[1])
            if old.startswith(f"{token}-")
            and lowest <= positions_of(old)[1] <= positions_of(old)[2] <= highest
        ]
        assert len(replaced) > 1
        assert after[name] == [row for rows in replaced for row in rows]
        assert len(after[name]) <= 10
    assert "slot-201-212.parquet" in after  # 12 rows: alone
    assert (
        [name for name in after if name.startswith("agent-")]
        == [name for name in before if name.startswith("agent-")]
        != []
    )
    earlier = next(row for rows in after.values() for row in rows if row["position"] == 200)
    assert (earlier["cells"], earlier["cell_values"]) == (
        before["slot-200-200.parquet"][0]["cells"],
        None,
    )
    assert sorted(map(json.dumps, (r for rs in after.values() for r in rs))) == sorted(
        map(json.dumps, (r for rs in before.values() for r in rs))
    )
    reread = ParquetChangeLog(tmp_path)
    assert {key: reread.last_position("users", *key) for key in last} == last
    assert (receipt.files_before, receipt.rows, receipt.leftovers) == (files, rows, 0)
    assert receipt.files_after == len(reread.files("users")) < files
    again = Publisher(reread).publish([captured(k, 111 + k) for k in range(5)])  # held
    assert (again.published, again.skipped) == ({}, 5)
    assert compact_table(reread, "users", max_rows=10).files_after == receipt.files_after
    assert not (tmp_path / "users" / COMPACTION_LOCK).exists()


def test_a_file_inside_another_s_range_with_rows_of_its_own_is_kept(tmp_path: Path) -> None:
    """Only an interrupted compaction leaves such a file with its rows in the other, which the
    next removes; two writers of one segment make files that overlap with rows of their own,
    and a compaction that removed one, or merged both under the name of one, would lose rows."""
    log = ParquetChangeLog(tmp_path)
    log.append("users", [(0, ChangeRows.from_mutations([captured(1, p) for p in (1, 9)]))])
    log.append("users", [(0, ChangeRows.from_mutations([captured(2, 5)]))])
    before = log_contents(tmp_path)
    receipt = compact_table(log, "users", max_rows=10)
    assert log_contents(tmp_path) == before
    assert (receipt.files_before, receipt.files_after, receipt.leftovers) == (2, 2, 0)


def test_neither_compaction_nor_publisher_removes_the_other_s_hidden_parts(
    tmp_path: Path,
) -> None:
    """A publisher removes the hidden parts of its segment a dead publisher left, before its
    first publish into a partition; a compaction removes those a dead compaction left."""
    log = ParquetChangeLog(tmp_path)
    publish_windows(log, 2)
    folder = tmp_path / "users" / "partition=0"
    rows = log_table(ChangeRows.from_mutations([captured(0, 100)]))
    publishers = write_part(folder / "slot-100-100.parquet", rows)
    compactions = write_part(folder / "slot-1-100.parquet", rows, suffix=STAGED_SUFFIX)
    compact_table(log, "users", max_rows=100)
    assert (publishers.exists(), compactions.exists()) == (True, False)
    compactions = write_part(folder / "slot-1-100.parquet", rows, suffix=STAGED_SUFFIX)
    Publisher(ParquetChangeLog(tmp_path), partitions=PARTITIONS).publish(
        [captured(k, 100 + k) for k in range(5)]
    )
    assert (publishers.exists(), compactions.exists()) == (False, True)


def test_a_publish_between_listing_and_merging_stays_as_it_is(tmp_path: Path) -> None:
    log = ParquetChangeLog(tmp_path)
    published = publish_windows(log, 4)
    listed = {file for _, file in log.files("users")}
    with compaction_of(log, "users", max_rows=100) as plan:
        published += publish_windows(log, 1, first=41)  # a capture's next window
        new = {file for _, file in log.files("users")} - listed
        receipt = plan.apply()
    assert new <= {file for _, file in log.files("users")}
    assert len(log.files("users")) == receipt.files_after + len(new) < len(listed)
    positions = sorted((m.audit.segment, m.audit.position) for m in log.read("users"))
    assert positions == sorted((m.audit.segment, m.audit.position) for m in published)


def segment_partitions(log: ParquetChangeLog) -> set[tuple[int, str]]:
    """The (partition, segment token) pairs that have files in the users log."""
    return {(partition, positions_of(file.name)[0]) for partition, file in log.files("users")}


def test_a_second_compaction_of_a_table_is_refused_while_one_runs(tmp_path: Path) -> None:
    log = ParquetChangeLog(tmp_path)
    publish_windows(log, 3)
    before = log_contents(tmp_path)
    with compaction_of(log, "users", max_rows=100) as plan:
        with pytest.raises(AlreadyRunningError, match="compaction of the change log of table"):
            compact_table(ParquetChangeLog(tmp_path), "users", max_rows=100)
        assert log_contents(tmp_path) == before
        plan.apply()
    assert len(log.files("users")) == len(segment_partitions(log)) < len(before[0])


@pytest.mark.parametrize(
    ("table", "max_rows", "error", "message"),
    [
        ("users", 0, ConfigurationError, "max_rows must be an integer >= 1, got 0"),
        (
            "orders",
            10,
            ConfigurationError,
            "no change log of table 'orders' in .* \\(its tables: 'users'\\)",
        ),
        ("..", 10, InvalidInputError, "cannot name a change log directory"),
    ],
)
def test_bad_arguments_are_refused_with_nothing_changed(
    tmp_path: Path, table: str, max_rows: int, error: type[Exception], message: str
) -> None:
    log = ParquetChangeLog(tmp_path / "log")
    publish_windows(log, 3)
    (tmp_path / "log" / "notes").mkdir()  # a folder that is no table's log
    before = log_contents(tmp_path)
    with pytest.raises(error, match=message):
        compact_table(log, table, max_rows=max_rows)
    assert log_contents(tmp_path) == before
    assert sorted(p.name for p in (tmp_path / "log").rglob(".*")) == []


def test_only_a_folder_of_table_logs_is_compacted(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="no change log directory"):
        table_logs(ParquetChangeLog(tmp_path / "missing"))
    (tmp_path / "docs" / "notes").mkdir(parents=True)
    with pytest.raises(ConfigurationError, match="holds no table's change log"):
        table_logs(ParquetChangeLog(tmp_path / "docs"))
    log = ParquetChangeLog(tmp_path / "docs")
    publish_windows(log, 1)
    assert table_logs(log) == ["users"]
    assert table_logs(log, ["users", "users"]) == ["users"]
