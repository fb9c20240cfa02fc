"""A publish that would skip a change the log does not hold: a source whose log went back.

The publisher skips every change at or below the last position its segment has in a partition,
which makes a window peeked again after a crash publish nothing twice. A source restored from a
copy (or failed over to a standby that lagged) commits other changes at positions the log holds
or has passed: skipped, they were lost without a word, and the capture advanced past them.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cdc_support import schema_of_t
from change_log_support import log_contents, mutation_of
from ordo.cdc import Mutation, Publisher
from ordo.cdc.ingest import MutationLines, ingest
from ordo.cdc.schema_registry import SchemaRegistry
from ordo.errors import SourceRewoundError
from ordo.storage.open import stores_at
from ordo.storage.parquet import ParquetChangeLog


def _committed(key: int, position: int, *, at_us: int) -> Mutation:
    """`mutation_of(key, position)` of table `t`, committed at `at_us` (as wal2json's commit
    timestamp, a capture's `captured_at_us`)."""
    mutation = mutation_of(key=key, position=position, table="t")
    return dataclasses.replace(
        mutation, audit=dataclasses.replace(mutation.audit, captured_at_us=at_us)
    )


def test_a_change_at_a_position_the_log_holds_for_another_is_refused(tmp_path: Path) -> None:
    """Positions 1..6 were published; the source, restored from a copy, commits keys 1..3 at
    2..4 again (other commits: other timestamps) and goes on at 7. The window repeated as it
    was is skipped quietly; the other one is refused with nothing written."""
    log = ParquetChangeLog(tmp_path)
    window = [_committed(p, p, at_us=1_000 + p) for p in range(1, 7)]
    assert Publisher(log, partitions=1).publish(window).published == {"t": 6}
    again = Publisher(ParquetChangeLog(tmp_path), partitions=1).publish(window)
    assert (again.published, again.skipped) == ({}, 6)  # a capture that crashed before advancing
    before = log_contents(tmp_path)
    restored = [_committed(k, k + 1, at_us=9_000) for k in (1, 2, 3)]
    for publisher in (Publisher(log, partitions=1), Publisher(ParquetChangeLog(tmp_path))):
        with pytest.raises(SourceRewoundError, match="position 2, which its change log") as info:
            publisher.publish([*restored, _committed(7, 7, at_us=9_001)])
        assert (info.value.table, info.value.segment, info.value.position) == ("t", "slot", 2)
        assert log_contents(tmp_path) == before


def test_a_change_below_the_last_position_that_the_log_lacks_is_refused(tmp_path: Path) -> None:
    """A position the log has passed but holds no row at (its positions are a commit's end LSN
    times 1000, so most are never used): another commit of a source that went back."""
    log = ParquetChangeLog(tmp_path)
    Publisher(log, partitions=1).publish([_committed(1, 10, at_us=1), _committed(2, 20, at_us=2)])
    before = log_contents(tmp_path)
    with pytest.raises(SourceRewoundError, match="position 15,"):
        Publisher(log, partitions=1).publish([_committed(3, 15, at_us=3)])
    assert log_contents(tmp_path) == before


def test_ingesting_changes_at_positions_the_log_has_passed_skips_them(tmp_path: Path) -> None:
    """An ingested file owns its audit: positions must grow within a segment, and those that do
    not are skipped as published, whatever their `captured_at_us` (0, or when it was made)."""
    log = ParquetChangeLog(tmp_path / "log")
    with stores_at(f"sqlite:///{tmp_path / 'journal.db'}") as stores:
        registry = SchemaRegistry(stores.schemas)
        registry.register(schema_of_t("n"))
        first = MutationLines(source="a", mutations=((1, _committed(1, 10, at_us=1)),))
        later = MutationLines(source="b", mutations=((1, _committed(2, 5, at_us=2)),))
        receipts = ingest([first, later], Publisher(log, partitions=1), registry)
    assert [(r.published, r.skipped) for r in receipts] == [({"t": 1}, 0), ({}, 1)]
