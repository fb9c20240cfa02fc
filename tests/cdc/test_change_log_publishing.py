"""The publisher and the Parquet change log: routing by key, order per key, idempotent writes
per segment, file names, and what a publish cut short or failed leaves behind."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from cdc_support import run_with_file_size_limit
from change_log_support import misrouted_files, mutation_of
from ordo.cdc import Cell, Mutation, Publisher, partition_of
from ordo.cdc.change_rows import ChangeRows
from ordo.errors import InvalidInputError, StorageError
from ordo.storage.parquet import ParquetChangeLog


def test_each_key_lands_in_one_partition_in_position_order(tmp_path: Path) -> None:
    log = ParquetChangeLog(tmp_path)
    mutations = [mutation_of(key=p % 5, position=p) for p in range(1, 41)]
    Publisher(log, partitions=3).publish(mutations[:20])
    Publisher(log, partitions=3).publish(mutations[20:])
    by_key: dict[object, list[int]] = {}
    for mutation in log.read("users"):
        by_key.setdefault(mutation.partition_key, []).append(mutation.audit.position)
    assert sorted(p for positions in by_key.values() for p in positions) == list(range(1, 41))
    for positions in by_key.values():
        assert positions == sorted(positions)
    assert misrouted_files(tmp_path / "users", 3) == []
    assert log.partitions("users") == sorted({partition_of((k,), 3) for k in range(5)})


def test_publishing_a_window_again_writes_nothing_twice(tmp_path: Path) -> None:
    log = ParquetChangeLog(tmp_path)
    window = [mutation_of(key=p, position=p) for p in range(1, 11)]
    first = Publisher(log).publish(window[:6])
    again = Publisher(log).publish(window)  # a capture that crashed before advancing its source
    assert first.published == {"users": 6}
    assert (again.published, again.skipped) == ({"users": 4}, 6)
    assert sorted(m.audit.position for m in log.read("users")) == list(range(1, 11))
    last = max(log.last_position("users", "slot", p) or 0 for p in log.partitions("users"))
    assert last == 10
    assert log.last_position("users", "other", 0) is None


def test_a_file_of_positions_out_of_order_is_named_for_its_lowest_and_highest(
    tmp_path: Path,
) -> None:
    ingested = [mutation_of(key=1, position=p) for p in (5, 3, 4)]  # JSON lines in any order
    log = ParquetChangeLog(tmp_path)
    Publisher(log, partitions=1).publish(ingested)
    names = [f.name for f in (tmp_path / "users" / "partition=0").glob("*.parquet")]
    assert names == ["slot-3-5.parquet"]
    for reader in (log, ParquetChangeLog(tmp_path)):  # what it kept, and what names tell
        assert reader.last_position("users", "slot", 0) == 5
        assert reader.summary("users").last_positions == {"slot": 5}
        again = Publisher(reader, partitions=1).publish(ingested)
        assert (again.published, again.skipped) == ({}, 3)
    assert sorted(m.audit.position for m in log.read("users")) == [3, 4, 5]


def test_a_publish_cut_short_between_partitions_is_completed(tmp_path: Path) -> None:
    log = ParquetChangeLog(tmp_path)
    window = [mutation_of(key=k, position=k) for k in range(1, 21)]
    by_partition: dict[int, list[Mutation]] = {}
    for mutation in window:
        by_partition.setdefault(partition_of(mutation.partition_key, 4), []).append(mutation)
    written = max(by_partition, key=lambda p: by_partition[p][-1].audit.position)
    # the crash came after this file
    log.append("users", [(written, ChangeRows.from_mutations(by_partition[written]))])
    receipt = Publisher(log, partitions=4).publish(window)
    assert receipt.skipped == len(by_partition[written])
    assert sorted(m.audit.position for m in log.read("users")) == list(range(1, 21))


def test_a_publish_becomes_visible_after_every_file_is_written(tmp_path: Path) -> None:
    log = ParquetChangeLog(tmp_path)
    good = ChangeRows.from_mutations([mutation_of(key=1, position=1)])
    mixed = ChangeRows.from_mutations(
        [mutation_of(key=2, position=2), mutation_of(key=3, position=3, segment="other")]
    )
    with pytest.raises(InvalidInputError, match="one segment"):
        log.append("users", [(0, good), (1, mixed)])
    assert list(log.read("users")) == []  # the good file was staged, not published
    assert list((tmp_path / "users").glob("partition=*/.*")) == []  # nor left behind
    log.append("users", [(0, good)])
    assert [m.audit.position for m in log.read("users")] == [1]


def test_a_publish_whose_rename_failed_is_not_published_again_by_a_smaller_retry(
    tmp_path: Path,
) -> None:
    """The log kept the positions it held before the publish, so a retry in the same process
    published the files renamed before the failure again (a capture retries a smaller window
    after a failed publish)."""
    log = ParquetChangeLog(tmp_path)
    Publisher(log, partitions=1).publish([mutation_of(key=0, position=1)])
    window = [mutation_of(key=k, position=k) for k in (2, 3)]
    first = ChangeRows.from_mutations(window[:1])
    second = ChangeRows.from_mutations([mutation_of(key=3, position=3, segment="other")])
    squatter = tmp_path / "users" / "partition=1" / "other-3-3.parquet"
    squatter.mkdir(parents=True)  # the second file's rename fails: a directory holds its name
    with pytest.raises(StorageError):
        log.append("users", [(0, first), (1, second)])
    squatter.rmdir()
    assert sorted(m.audit.position for m in log.read("users")) == [1, 2]  # the first is in place
    receipt = Publisher(log, partitions=1).publish(window[:1])
    assert (receipt.published, receipt.skipped) == ({}, 1)
    assert sorted(m.audit.position for m in log.read("users")) == [1, 2]
    assert list((tmp_path / "users").glob("partition=*/.*")) == []  # no hidden part is left


def test_segments_are_deduplicated_separately(tmp_path: Path) -> None:
    log = ParquetChangeLog(tmp_path)
    Publisher(log).publish([mutation_of(1, 5, segment="replica-a/CommitLog-1.log")])
    receipt = Publisher(log).publish([mutation_of(1, 3, segment="replica-b/CommitLog-1.log")])
    assert receipt.published == {"users": 1}
    assert len(list(log.read("users"))) == 2


def test_segments_published_together_keep_their_own_positions(tmp_path: Path) -> None:
    log = ParquetChangeLog(tmp_path)
    a = [mutation_of(1, p, segment="replica-a") for p in (100, 101, 102)]
    b = [mutation_of(1, p, segment="replica-b") for p in (1, 2, 3)]
    Publisher(log, partitions=1).publish([a[0], b[0], a[1], b[1]])
    again = Publisher(ParquetChangeLog(tmp_path), partitions=1).publish([*a, *b])
    assert (again.published, again.skipped) == ({"users": 2}, 4)
    assert sorted((m.audit.segment, m.audit.position) for m in log.read("users")) == sorted(
        (m.audit.segment, m.audit.position) for m in [*a, *b]
    )
    names = sorted(f.name for f in (tmp_path / "users" / "partition=0").glob("*.parquet"))
    assert names == [
        "replica-2da-100-101.parquet",
        "replica-2da-102-102.parquet",
        "replica-2db-1-2.parquet",
        "replica-2db-3-3.parquet",
    ]


def test_segments_that_look_alike_keep_apart_and_no_file_is_hidden_from_spark(
    tmp_path: Path,
) -> None:
    segments = ["a-b", "a b", "a_b", "_a", ".a", "", "é/x"]
    for segment in segments:  # each publish by a fresh log, which reads positions from names
        receipt = Publisher(ParquetChangeLog(tmp_path), partitions=1).publish(
            [mutation_of(1, p, segment=segment) for p in (1, 2)]
        )
        assert receipt.published == {"users": 2}, segment
    log = ParquetChangeLog(tmp_path)
    assert sorted((m.audit.segment, m.audit.position) for m in log.read("users")) == sorted(
        (s, p) for s in segments for p in (1, 2)
    )
    names = [f.name for f in (tmp_path / "users" / "partition=0").iterdir()]
    assert len(names) == len(segments)
    assert not [n for n in names if n.startswith(("_", "."))]
    assert log.summary("users").last_positions == dict.fromkeys(sorted(segments), 2)


def test_mutations_without_a_position_are_all_kept(tmp_path: Path) -> None:
    unpositioned = [mutation_of(k, 0, segment="") for k in (1, 2)]
    for window in ([*unpositioned, mutation_of(3, 1, segment="")], unpositioned):
        receipt = Publisher(ParquetChangeLog(tmp_path), partitions=1).publish(window)
        assert (receipt.published, receipt.skipped) == ({"users": len(window)}, 0)
    log = ParquetChangeLog(tmp_path)
    assert sorted(m.audit.position for m in log.read("users")) == [0, 0, 0, 0, 1]
    files = list((tmp_path / "users").glob("partition=*/*"))
    assert not [f for f in files if f.name.startswith(("_", "."))]
    assert log.summary("users").last_positions == {"": 1}
    mixed = ChangeRows.from_mutations(
        [mutation_of(1, 0, segment=""), mutation_of(1, 2, segment="")]
    )
    with pytest.raises(InvalidInputError, match="with or without positions, not both"):
        log.append("users", [(0, mixed)])


def test_a_directory_the_log_creates_is_synced_into_its_parent_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new partition's files were synced, but not its directory's entry in the table's
    directory, so a crash could lose the directory with the files (the source advanced)."""
    synced: list[Path] = []
    fsync = os.fsync

    def recording_fsync(descriptor: int) -> None:
        synced.append(Path(os.readlink(f"/proc/self/fd/{descriptor}")))
        fsync(descriptor)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    root = tmp_path / "log"
    table = root / "users"
    log = ParquetChangeLog(root)
    other = next(k for k in range(2, 99) if partition_of((k,), 4) != partition_of((1,), 4))

    Publisher(log, partitions=4).publish([mutation_of(1, 1)])

    # each new directory's parent, and the directories renamed into (the record, the file)
    first = table / f"partition={partition_of((1,), 4)}"
    assert {path for path in synced if path.is_dir()} == {tmp_path, root, table, first}
    synced.clear()

    Publisher(log, partitions=4).publish([mutation_of(other, 2)])

    partition = table / f"partition={partition_of((other,), 4)}"
    assert {path for path in synced if path.is_dir()} == {table, partition}
    synced.clear()

    Publisher(log, partitions=4).publish([mutation_of(other, 3)])

    assert {path for path in synced if path.is_dir()} == {partition}  # made once, synced once
    assert sorted(m.audit.position for m in log.read("users")) == [1, 2, 3]


def test_characters_outside_the_basic_plane_are_published_whole(tmp_path: Path) -> None:
    log = ParquetChangeLog(tmp_path)
    emoji = "\U0001f600"
    as_pair = "\ud83d\ude00"  # the same character as two code points: JSON reads it back whole
    mutation = dataclasses.replace(
        mutation_of(key=1, position=1),
        partition_key=(emoji,),
        cells={"n": Cell(value=as_pair, write_time=1), "m": Cell(value="\\ud800", write_time=1)},
    )
    Publisher(log).publish([mutation])
    (back,) = log.read("users")
    assert back.partition_key == (emoji,)
    assert {c: cell.value for c, cell in back.cells.items()} == {"n": emoji, "m": "\\ud800"}


def test_a_publish_that_cannot_be_written_leaves_no_hidden_file(tmp_path: Path) -> None:
    """The file that failed stayed as `.<name>.<token>.tmp` in its partition."""
    log = ParquetChangeLog(tmp_path)
    Publisher(log, partitions=1).publish([mutation_of(key=0, position=1)])
    failed = run_with_file_size_limit(
        f"""
        from ordo.cdc import Audit, Cell, Mutation, Publisher
        from ordo.storage.parquet import ParquetChangeLog
        mutations = [
            Mutation(
                table="users",
                partition_key=(p,),
                cells={{"n": Cell(value="x" * 100 + str(p), write_time=p)}},
                audit=Audit(source="test", segment="slot", position=p),
            )
            for p in range(2, 20_002)
        ]
        try:
            Publisher(ParquetChangeLog({str(tmp_path)!r}), partitions=1).publish(mutations)
        except OSError:
            print("refused")
        """,
        limit_bytes=64 * 1024,
    )
    assert failed.stdout.strip() == "refused", failed.stderr
    files = sorted(p.name for p in (tmp_path / "users" / "partition=0").iterdir())
    assert len(files) == 1
    assert not files[0].startswith(".")
