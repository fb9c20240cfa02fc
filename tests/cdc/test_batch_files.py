"""Batch directories replaced whole, and telling which ones a run wrote (dead letters)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from cdc_support import run_with_file_size_limit
from kill_support import run_until_killed
from ordo.storage.parquet.batch_files import BatchListing, replace_batch

DYING_WRITER = Path(__file__).with_name("dying_batch_writer.py")


def _rows(count: int) -> pa.Table:
    return pa.table({"n": pa.array(range(count), pa.int64())})


def test_a_listing_counts_the_rows_of_batches_written_or_replaced_after_it(
    tmp_path: Path,
) -> None:
    root = tmp_path / "dead_letters"
    assert BatchListing.of(root).rows_written_since() == 0  # no directory yet
    replace_batch(root, 0, _rows(2))
    replace_batch(root, 1, _rows(3))
    listing = BatchListing.of(root)
    assert listing.rows_written_since() == 0  # what was there before does not count

    replace_batch(root, 1, _rows(4))  # a replayed batch, written again
    replace_batch(root, 2, _rows(5))
    assert listing.rows_written_since() == 9
    assert BatchListing.of(root).rows_written_since() == 0


def test_a_batch_that_cannot_be_written_leaves_nothing_behind(tmp_path: Path) -> None:
    """A hidden staging directory with a partial file stayed next to the batches."""
    root = tmp_path / "messages"
    replace_batch(root, 0, _rows(2))
    failed = run_with_file_size_limit(
        f"""
        import pyarrow as pa
        from ordo.storage.parquet.batch_files import replace_batch
        try:
            replace_batch({str(root)!r}, 1, pa.table({{"n": pa.array(range(100_000), pa.int64())}}))
        except OSError:
            print("refused")
        """,
        limit_bytes=4096,
    )
    assert failed.stdout.strip() == "refused", failed.stderr
    assert sorted(p.name for p in root.iterdir()) == ["batch_id=0"]


def test_the_next_write_of_a_batch_removes_what_a_killed_writer_of_it_left(
    tmp_path: Path,
) -> None:
    """A driver killed between moving the old directory aside and the new one in left both,
    hidden, for good: readers skip them and the replayed batch writes its own (disk leaked)."""
    root = tmp_path / "messages"
    replace_batch(root, 0, _rows(2))
    assert run_until_killed(DYING_WRITER, str(root)) == ["replacing"]
    left = sorted(p.name[-4:] for p in root.iterdir())
    assert left == [".old", ".tmp"]  # no batch_id=0 until the replay writes it again

    replace_batch(root, 0, _rows(10))  # the replayed batch
    assert sorted(p.name for p in root.iterdir()) == ["batch_id=0"]
    assert pq.read_table(root / "batch_id=0").num_rows == 10
