"""The publisher and the Parquet change log: routing by key, order per key, idempotent writes."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from cdc_support import run_with_file_size_limit
from ordo.cdc import Audit, Cell, Mutation, Publisher, partition_of
from ordo.cdc.change_rows import ChangeRows
from ordo.cdc.publisher import DEFAULT_PARTITIONS
from ordo.errors import (
    ConfigurationError,
    InvalidInputError,
    MalformedMutationError,
    PartitionCountMismatchError,
    StorageIntegrityError,
)
from ordo.storage.parquet import ParquetChangeLog


def _mutation(key: int, position: int, *, segment: str = "slot") -> Mutation:
    return Mutation(
        table="users",
        partition_key=(key,),
        cells={"n": Cell(value=position, write_time=position)},
        audit=Audit(source="test", segment=segment, position=position),
    )


def test_each_key_lands_in_one_partition_in_position_order(tmp_path: Path) -> None:
    log = ParquetChangeLog(tmp_path)
    mutations = [_mutation(key=p % 5, position=p) for p in range(1, 41)]
    Publisher(log, partitions=3).publish(mutations[:20])
    Publisher(log, partitions=3).publish(mutations[20:])
    by_key: dict[object, list[int]] = {}
    for mutation in log.read("users"):
        by_key.setdefault(mutation.partition_key, []).append(mutation.audit.position)
    assert sorted(p for positions in by_key.values() for p in positions) == list(range(1, 41))
    for positions in by_key.values():
        assert positions == sorted(positions)
    for file in (tmp_path / "users").glob("partition=*/*.parquet"):
        partition = int(file.parent.name.removeprefix("partition="))
        keys = pq.read_table(file).column("partition_key").to_pylist()
        assert {partition_of(tuple(json.loads(k)), 3) for k in keys} == {partition}
    assert log.partitions("users") == sorted({partition_of((k,), 3) for k in range(5)})


def test_publishing_a_window_again_writes_nothing_twice(tmp_path: Path) -> None:
    log = ParquetChangeLog(tmp_path)
    window = [_mutation(key=p, position=p) for p in range(1, 11)]
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
    ingested = [_mutation(key=1, position=p) for p in (5, 3, 4)]  # JSON lines in any order
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
    window = [_mutation(key=k, position=k) for k in range(1, 21)]
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
    good = ChangeRows.from_mutations([_mutation(key=1, position=1)])
    mixed = ChangeRows.from_mutations(
        [_mutation(key=2, position=2), _mutation(key=3, position=3, segment="other")]
    )
    with pytest.raises(InvalidInputError, match="one segment"):
        log.append("users", [(0, good), (1, mixed)])
    assert list(log.read("users")) == []  # the good file was staged, not published
    assert list((tmp_path / "users").glob("partition=*/.*")) == []  # nor left behind
    log.append("users", [(0, good)])
    assert [m.audit.position for m in log.read("users")] == [1]


def test_segments_are_deduplicated_separately(tmp_path: Path) -> None:
    log = ParquetChangeLog(tmp_path)
    Publisher(log).publish([_mutation(1, 5, segment="replica-a/CommitLog-1.log")])
    receipt = Publisher(log).publish([_mutation(1, 3, segment="replica-b/CommitLog-1.log")])
    assert receipt.published == {"users": 1}
    assert len(list(log.read("users"))) == 2


def test_segments_published_together_keep_their_own_positions(tmp_path: Path) -> None:
    log = ParquetChangeLog(tmp_path)
    a = [_mutation(1, p, segment="replica-a") for p in (100, 101, 102)]
    b = [_mutation(1, p, segment="replica-b") for p in (1, 2, 3)]
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


@pytest.mark.parametrize("table", ["../../escaped", "/tmp/abs", "a/b", "..", "nul\x00"])
def test_a_table_name_that_is_not_one_directory_name_is_refused(tmp_path: Path, table: str) -> None:
    log = ParquetChangeLog(tmp_path / "log" / "root")
    mutation = Mutation(
        table=table,
        partition_key=(1,),
        cells={"a": Cell(value=1, write_time=1)},
        audit=Audit(source="s", segment="slot", position=1),
    )
    with pytest.raises(InvalidInputError, match="cannot name a change log directory"):
        Publisher(log, partitions=2).publish([mutation])
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_a_table_name_that_is_not_unicode_text_is_refused(tmp_path: Path) -> None:
    log = ParquetChangeLog(tmp_path)
    mutation = dataclasses.replace(_mutation(key=1, position=1), table="users\udcff")
    with pytest.raises(InvalidInputError, match=r"^table name 'users\\udcff' is not valid Unicode"):
        Publisher(log).publish([mutation])
    with pytest.raises(InvalidInputError, match="not valid Unicode"):
        log.summary("\ud800")  # as `ordo cdc status` would ask for a name given in bytes
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("element", [None, "m", {"table": "users"}])
def test_publishing_what_is_not_a_mutation_is_refused_before_anything_is_written(
    tmp_path: Path, element: object
) -> None:
    log = ParquetChangeLog(tmp_path)
    Publisher(log).publish([_mutation(key=1, position=1)])
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(MalformedMutationError, match="only Mutations can be published, got "):
        Publisher(log).publish([_mutation(key=2, position=2), element])  # type: ignore[list-item]
    assert sorted(tmp_path.rglob("*")) == before


def test_keys_must_be_tuples_not_strings() -> None:
    with pytest.raises(MalformedMutationError, match="keys must be tuples"):
        Mutation(table="t", partition_key="abc", audit=Audit(source="s"))  # type: ignore[arg-type]


def test_segments_that_look_alike_keep_apart_and_no_file_is_hidden_from_spark(
    tmp_path: Path,
) -> None:
    segments = ["a-b", "a b", "a_b", "_a", ".a", "", "é/x"]
    for segment in segments:  # each publish by a fresh log, which reads positions from names
        receipt = Publisher(ParquetChangeLog(tmp_path), partitions=1).publish(
            [_mutation(1, p, segment=segment) for p in (1, 2)]
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
    unpositioned = [_mutation(k, 0, segment="") for k in (1, 2)]
    for window in ([*unpositioned, _mutation(3, 1, segment="")], unpositioned):
        receipt = Publisher(ParquetChangeLog(tmp_path), partitions=1).publish(window)
        assert (receipt.published, receipt.skipped) == ({"users": len(window)}, 0)
    log = ParquetChangeLog(tmp_path)
    assert sorted(m.audit.position for m in log.read("users")) == [0, 0, 0, 0, 1]
    files = list((tmp_path / "users").glob("partition=*/*"))
    assert not [f for f in files if f.name.startswith(("_", "."))]
    assert log.summary("users").last_positions == {"": 1}
    mixed = ChangeRows.from_mutations([_mutation(1, 0, segment=""), _mutation(1, 2, segment="")])
    with pytest.raises(InvalidInputError, match="with or without positions, not both"):
        log.append("users", [(0, mixed)])


def _files(root: Path) -> dict[str, bytes]:
    """Every file under `root` with its content: what a refused publish must leave as it was."""
    return {str(f.relative_to(root)): f.read_bytes() for f in root.rglob("*") if f.is_file()}


def test_a_publish_with_another_partition_count_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    Publisher(ParquetChangeLog(tmp_path), partitions=8).publish([_mutation(1, 1)])
    before = _files(tmp_path)
    again = [_mutation(1, 1), _mutation(2, 2)]
    other = Mutation(
        table="other",
        partition_key=(1,),
        cells={"n": Cell(value=1, write_time=1)},
        audit=Audit(source="test", segment="slot", position=1),
    )
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
    Publisher(ParquetChangeLog(tmp_path)).publish([_mutation(1, 1)])
    assert ParquetChangeLog(tmp_path).partition_count("users") == DEFAULT_PARTITIONS


def test_a_publisher_given_no_count_follows_each_tables_log(tmp_path: Path) -> None:
    Publisher(ParquetChangeLog(tmp_path), partitions=3).publish([_mutation(k, k) for k in (1, 2)])
    receipt = Publisher(ParquetChangeLog(tmp_path)).publish([_mutation(k, k) for k in (1, 2, 3)])
    assert (receipt.published, receipt.skipped) == ({"users": 1}, 2)  # the duplicates were seen
    log = ParquetChangeLog(tmp_path)
    for file in (tmp_path / "users").glob("partition=*/*.parquet"):
        keys = pq.read_table(file).column("partition_key").to_pylist()
        assert {partition_of(tuple(json.loads(k)), 3) for k in keys} == {
            int(file.parent.name.removeprefix("partition="))
        }
    assert log.partition_count("users") == 3
    other = dataclasses.replace(_mutation(1, 1), table="other")
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
        Publisher(ParquetChangeLog(root), partitions=5).publish([_mutation(1, 1)])
    receipt = Publisher(ParquetChangeLog(root)).publish([_mutation(1, 1)])
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
    Publisher(first, partitions=4).publish([_mutation(1, 1)])
    with pytest.raises(PartitionCountMismatchError, match="has 4 partitions, a publish with 3"):
        second.record_partitions("users", 3)
    assert json.loads((tmp_path / "users" / "_partitions.json").read_text()) == {"partitions": 4}
    assert not [f for f in (tmp_path / "users").iterdir() if f.name.endswith(".tmp")]


def test_a_log_written_before_counts_were_recorded_must_fit_the_count(tmp_path: Path) -> None:
    keys = range(1, 21)
    by_partition: dict[int, list[Mutation]] = {}
    for key in keys:
        by_partition.setdefault(partition_of((key,), 4), []).append(_mutation(key, key))
    ParquetChangeLog(tmp_path).append(  # files, no record: how ordo wrote logs before
        "users", [(p, ChangeRows.from_mutations(ms)) for p, ms in sorted(by_partition.items())]
    )
    before = _files(tmp_path)
    for partitions in (3, None):  # None: the default, 8, does not fit either
        with pytest.raises(PartitionCountMismatchError) as refused:
            Publisher(ParquetChangeLog(tmp_path), partitions=partitions).publish([_mutation(1, 1)])
        assert refused.value.recorded is None
        assert "written before ordo recorded partition counts" in str(refused.value)
        assert "use --partitions (partitions=) with the count it was written with" in str(
            refused.value
        )
    assert _files(tmp_path) == before
    receipt = Publisher(ParquetChangeLog(tmp_path), partitions=4).publish(
        [_mutation(k, k) for k in range(1, 22)]
    )
    assert (receipt.published, receipt.skipped) == ({"users": 1}, 20)
    assert ParquetChangeLog(tmp_path).partition_count("users") == 4  # recorded: followed now
    assert Publisher(ParquetChangeLog(tmp_path)).settle(["users"]) == {"users": 4}


@pytest.mark.parametrize("text", ["", "{}", '{"partitions": 0}', '{"partitions": "8"}', "[8]"])
def test_a_record_that_holds_no_count_is_an_integrity_error(tmp_path: Path, text: str) -> None:
    Publisher(ParquetChangeLog(tmp_path), partitions=2).publish([_mutation(1, 1)])
    (tmp_path / "users" / "_partitions.json").write_text(text)
    with pytest.raises(StorageIntegrityError, match="does not hold a partition count"):
        Publisher(ParquetChangeLog(tmp_path)).publish([_mutation(2, 2)])


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

    Publisher(log, partitions=4).publish([_mutation(1, 1)])

    # each new directory's parent, and the directories renamed into (the record, the file)
    first = table / f"partition={partition_of((1,), 4)}"
    assert {path for path in synced if path.is_dir()} == {tmp_path, root, table, first}
    synced.clear()

    Publisher(log, partitions=4).publish([_mutation(other, 2)])

    partition = table / f"partition={partition_of((other,), 4)}"
    assert {path for path in synced if path.is_dir()} == {table, partition}
    synced.clear()

    Publisher(log, partitions=4).publish([_mutation(other, 3)])

    assert {path for path in synced if path.is_dir()} == {partition}  # made once, synced once
    assert sorted(m.audit.position for m in log.read("users")) == [1, 2, 3]


@pytest.mark.parametrize("field", ["source", "replica", "segment"])
@pytest.mark.parametrize("text", ["\ud800", "a\x00b"])
def test_an_audit_text_no_store_can_hold_is_refused_before_anything_is_written(
    tmp_path: Path, field: str, text: str
) -> None:
    log = ParquetChangeLog(tmp_path)
    good = _mutation(key=1, position=1)
    texts: dict[str, Any] = {field: text}  # any of the audit's text fields, by name
    bad = dataclasses.replace(good, audit=dataclasses.replace(good.audit, **texts))
    with pytest.raises(MalformedMutationError, match=f"^audit {field} "):
        Publisher(log).publish([good, bad])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("partitions", [0, -1, 1.5, True, "2", 2**53])
def test_partition_of_takes_only_a_partition_count(partitions: object) -> None:
    with pytest.raises(ConfigurationError, match=r"^partitions "):
        partition_of((1,), partitions)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [{1}, b"x", object()])
def test_a_cell_value_json_has_no_form_for_is_refused_before_anything_is_written(
    tmp_path: Path, value: object
) -> None:
    good = _mutation(key=1, position=1)
    bad = dataclasses.replace(good, cells={"n": Cell(value=value, write_time=2)})  # type: ignore[arg-type]
    with pytest.raises(MalformedMutationError, match=r"^mutation of table 'users' key \(1,\): "):
        Publisher(ParquetChangeLog(tmp_path)).publish([good, bad])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "fields",
    [
        {"partition_key": ("a\udcff",)},
        {"clustering_key": ("\ud800",)},
        {"cells": {"n": Cell(value="\ud800x", write_time=2)}},
        {"cells": {"n": Cell(value=["ok", {"deep": "\udfff"}], write_time=2, ttl_s=5)}},
        {"cells": {"\ud800": Cell(value=1, write_time=2)}},
    ],
)
def test_a_lone_surrogate_in_a_key_or_cell_is_refused_before_anything_is_written(
    tmp_path: Path, fields: dict[str, object]
) -> None:
    bad = dataclasses.replace(_mutation(key=1, position=2), **fields)  # type: ignore[arg-type]
    with pytest.raises(MalformedMutationError, match="holds a lone surrogate"):
        Publisher(ParquetChangeLog(tmp_path)).publish([_mutation(key=1, position=1), bad])
    assert list(tmp_path.iterdir()) == []


def test_characters_outside_the_basic_plane_are_published_whole(tmp_path: Path) -> None:
    log = ParquetChangeLog(tmp_path)
    emoji = "\U0001f600"
    as_pair = "\ud83d\ude00"  # the same character as two code points: JSON reads it back whole
    mutation = dataclasses.replace(
        _mutation(key=1, position=1),
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
    Publisher(log, partitions=1).publish([_mutation(key=0, position=1)])
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


@pytest.mark.parametrize(
    "key", ["abc", ["abc"], (), None, 5, (float("nan"),), ({1},), (b"x",), ("\ud800",)]
)
def test_partition_of_takes_only_a_partition_key(key: object) -> None:
    """A str was routed as one key value per character, a list or () as no mutation's key."""
    with pytest.raises(MalformedMutationError, match="partition key"):
        partition_of(key, 4)  # type: ignore[arg-type]
