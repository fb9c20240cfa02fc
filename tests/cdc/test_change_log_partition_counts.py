"""The partition count of a table's change log: recorded with its first publish, followed by a
publisher given none, and any other count refused before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from change_log_support import misrouted_files, mutation_of
from ordo.cdc import Mutation, Publisher, partition_of
from ordo.cdc.change_rows import ChangeRows
from ordo.cdc.publisher import DEFAULT_PARTITIONS
from ordo.errors import ConfigurationError, PartitionCountMismatchError, StorageIntegrityError
from ordo.storage.parquet import ParquetChangeLog


def _files(root: Path) -> dict[str, bytes]:
    """Every file under `root` with its content: what a refused publish must leave as it was."""
    return {str(f.relative_to(root)): f.read_bytes() for f in root.rglob("*") if f.is_file()}


def test_a_publish_with_another_partition_count_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    Publisher(ParquetChangeLog(tmp_path), partitions=8).publish([mutation_of(1, 1)])
    before = _files(tmp_path)
    again = [mutation_of(1, 1), mutation_of(2, 2)]
    other = mutation_of(1, 1, table="other")
    for log in (ParquetChangeLog(tmp_path), ParquetChangeLog(tmp_path)):  # read, then kept
        for window in (again, [other, *again]):  # a new table of the window is not started
            with pytest.raises(PartitionCountMismatchError) as refused:
                Publisher(log, partitions=3).publish(window)
            assert (refused.value.table, refused.value.recorded) == ("users", 8)
            assert "its change log has 8 partitions, a publish with 3 is refused" in str(
                refused.value
            )
            assert "use --partitions 8 (partitions=8)" in str(refused.value)
        with pytest.raises(PartitionCountMismatchError):
            Publisher(log, partitions=3).settle(["users"])
    assert _files(tmp_path) == before
    assert json.loads((tmp_path / "users" / "_partitions.json").read_text()) == {"partitions": 8}


@pytest.mark.parametrize("partitions", [True, 1.5, "4", 0, 2**64])
def test_a_partition_count_that_is_no_count_is_refused_and_nothing_is_recorded(
    tmp_path: Path, partitions: object
) -> None:
    """True and 1.5 were recorded with the first publish, and every later publish refused."""
    with pytest.raises(ConfigurationError, match=r"partitions (must be an integer|is too large)"):
        Publisher(ParquetChangeLog(tmp_path), partitions=partitions)  # type: ignore[arg-type]
    assert _files(tmp_path) == {}
    Publisher(ParquetChangeLog(tmp_path)).publish([mutation_of(1, 1)])
    assert ParquetChangeLog(tmp_path).partition_count("users") == DEFAULT_PARTITIONS


def test_a_publisher_given_no_count_follows_each_tables_log(tmp_path: Path) -> None:
    Publisher(ParquetChangeLog(tmp_path), partitions=3).publish([mutation_of(k, k) for k in (1, 2)])
    receipt = Publisher(ParquetChangeLog(tmp_path)).publish([mutation_of(k, k) for k in (1, 2, 3)])
    assert (receipt.published, receipt.skipped) == ({"users": 1}, 2)  # the duplicates were seen
    log = ParquetChangeLog(tmp_path)
    assert misrouted_files(tmp_path / "users", 3) == []
    assert log.partition_count("users") == 3
    other = mutation_of(1, 1, table="other")
    Publisher(log).publish([other])  # a new log gets the default
    assert log.partition_count("other") == DEFAULT_PARTITIONS


def test_the_partition_count_is_recorded_before_the_files_and_hidden_from_spark(
    tmp_path: Path,
) -> None:
    root = tmp_path / "log"
    log = ParquetChangeLog(root)
    assert Publisher(log, partitions=2).settle(["users"]) == {"users": 2}
    assert not root.exists()  # settling writes nothing
    log.record_partitions("users", 2)  # a crash after the record, before the files
    assert [f.name for f in (root / "users").iterdir()] == ["_partitions.json"]
    with pytest.raises(PartitionCountMismatchError, match="has 2 partitions"):
        Publisher(ParquetChangeLog(root), partitions=5).publish([mutation_of(1, 1)])
    receipt = Publisher(ParquetChangeLog(root)).publish([mutation_of(1, 1)])
    assert receipt.published == {"users": 1}
    assert [p.name for p in (root / "users").iterdir() if p.is_dir()] == [
        f"partition={partition_of((1,), 2)}"
    ]
    # Spark lists no name that starts with `_` or `.`; one with `=` would be a partition to it
    assert log.tables() == ["users"]
    assert log.summary("users").files == 1


def test_of_two_first_publishes_with_other_counts_the_second_is_refused(tmp_path: Path) -> None:
    first, second = ParquetChangeLog(tmp_path), ParquetChangeLog(tmp_path)
    assert Publisher(second, partitions=3).settle(["users"]) == {"users": 3}
    Publisher(first, partitions=4).publish([mutation_of(1, 1)])
    with pytest.raises(PartitionCountMismatchError, match="has 4 partitions, a publish with 3"):
        second.record_partitions("users", 3)
    assert json.loads((tmp_path / "users" / "_partitions.json").read_text()) == {"partitions": 4}
    assert not [f for f in (tmp_path / "users").iterdir() if f.name.endswith(".tmp")]


def test_a_log_written_before_counts_were_recorded_must_fit_the_count(tmp_path: Path) -> None:
    keys = range(1, 21)
    by_partition: dict[int, list[Mutation]] = {}
    for key in keys:
        by_partition.setdefault(partition_of((key,), 4), []).append(mutation_of(key, key))
    ParquetChangeLog(tmp_path).append(  # files, no record: how ordo wrote logs before
        "users", [(p, ChangeRows.from_mutations(ms)) for p, ms in sorted(by_partition.items())]
    )
    before = _files(tmp_path)
    for partitions in (3, None):  # None: the default, 8, does not fit either
        with pytest.raises(PartitionCountMismatchError) as refused:
            Publisher(ParquetChangeLog(tmp_path), partitions=partitions).publish(
                [mutation_of(1, 1)]
            )
        assert refused.value.recorded is None
        assert "written before ordo recorded partition counts" in str(refused.value)
        assert "use --partitions (partitions=) with the count it was written with" in str(
            refused.value
        )
    assert _files(tmp_path) == before
    receipt = Publisher(ParquetChangeLog(tmp_path), partitions=4).publish(
        [mutation_of(k, k) for k in range(1, 22)]
    )
    assert (receipt.published, receipt.skipped) == ({"users": 1}, 20)
    assert ParquetChangeLog(tmp_path).partition_count("users") == 4  # recorded: followed now
    assert Publisher(ParquetChangeLog(tmp_path)).settle(["users"]) == {"users": 4}


def test_a_file_without_the_keys_is_an_integrity_error_naming_it(tmp_path: Path) -> None:
    """Keys are read with `pq.ParquetFile`, which leaves out a column the file lacks without a
    word (`pq.read_table` refused it, but imports pandas): the file is named, not read as none."""
    log = ParquetChangeLog(tmp_path)
    log.append("users", [(0, ChangeRows.from_mutations([mutation_of(1, 1)]))])
    (file,) = [file for _, file in log.files("users")]
    pq.write_table(pq.read_table(file).drop_columns(["partition_key"]), file)
    with pytest.raises(StorageIntegrityError) as refused:
        Publisher(ParquetChangeLog(tmp_path), partitions=4).publish([mutation_of(2, 2)])
    assert str(refused.value) == (
        f"change log file {file} cannot be read as one: it has no column 'partition_key'"
    )


@pytest.mark.parametrize("text", ["", "{}", '{"partitions": 0}', '{"partitions": "8"}', "[8]"])
def test_a_record_that_holds_no_count_is_an_integrity_error(tmp_path: Path, text: str) -> None:
    Publisher(ParquetChangeLog(tmp_path), partitions=2).publish([mutation_of(1, 1)])
    (tmp_path / "users" / "_partitions.json").write_text(text)
    with pytest.raises(StorageIntegrityError, match="does not hold a partition count"):
        Publisher(ParquetChangeLog(tmp_path)).publish([mutation_of(2, 2)])


@pytest.mark.parametrize("partitions", [0, -1, 1.5, True, "2", 2**53])
def test_partition_of_takes_only_a_partition_count(partitions: object) -> None:
    with pytest.raises(ConfigurationError, match=r"^partitions "):
        partition_of((1,), partitions)  # type: ignore[arg-type]
