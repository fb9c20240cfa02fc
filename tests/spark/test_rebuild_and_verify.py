"""The Spark rebuild and `verify` on both backends, on journals written by several writers."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from operations_support import (
    WRITE,
    execute,
    one_row,
    progress_rows,
    tag_view_rows,
    write_with_writers,
)
from ordo import NewEvent, open_journal
from ordo.cli.root import cli
from ordo.clock import ManualClock
from ordo.errors import ActiveWriterError, SchemaVersionError
from ordo.spark.rebuild import rebuild_all
from ordo.spark.verify import verify_tag_views
from ordo.storage.open import stores_at
from ordo.tools.cleanup import Cleanup
from ordo.tools.reconciliation import Reconciliation
from ordo.tools.verify_report import ProblemKind, VerifyReport
from ordo.types import Tag
from sqlite_support import LATEST, older_journal, stored_version

pytestmark = pytest.mark.spark

COPY = (
    "INSERT INTO tag_views SELECT tag, timebucket, timeuuid, {pid}, {nr}, sequence_nr, "
    "persistence_id_hash, writer_uuid, serializer, manifest, payload, metadata, tags "
    "FROM tag_views WHERE tag = ? AND persistence_id = ? AND tag_pid_sequence_nr = ?"
)


def _corrupt(url: str) -> None:
    """One of each: a deleted row, a duplicated row, shifted numbers, a moved row, an orphan."""
    execute(
        url,
        "DELETE FROM tag_views WHERE tag = 'a' AND persistence_id = 'w0-p1' "
        "AND tag_pid_sequence_nr = 2",
    )
    execute(url, COPY.format(pid="persistence_id", nr="1001"), ("b", "w1-p0", 1))
    execute(
        url,
        "UPDATE tag_views SET tag_pid_sequence_nr = tag_pid_sequence_nr + 1 "
        "WHERE tag = 'a' AND persistence_id = 'w2-p3' AND tag_pid_sequence_nr >= 3",
    )
    execute(
        url,
        "UPDATE tag_views SET timebucket = timebucket - 3600000 "
        "WHERE tag = 'b' AND persistence_id = 'w0-p2' AND tag_pid_sequence_nr = 1",
    )
    execute(url, COPY.format(pid="'ghost'", nr="1"), ("a", "w1-p1", 1))


def _found(report: VerifyReport, kind: ProblemKind) -> set[tuple[str, str, int]]:
    return {(p.tag, p.persistence_id, p.tag_pid_sequence_nr) for p in report.of_kind(kind)}


def test_verify_reports_exactly_what_was_corrupted_and_a_repair_restores_it(
    spark: SparkSession, journal_url: str
) -> None:
    write_with_writers(journal_url)
    before, progress = tag_view_rows(journal_url), progress_rows(journal_url)
    shifted_nrs = {r[4] for r in before if r[0] == "a" and r[3] == "w2-p3" and r[4] >= 3}
    _corrupt(journal_url)

    report = verify_tag_views(spark, journal_url, partitions=2)

    assert not report.is_clean
    assert report.tagged_events == len(before)
    assert report.tag_view_rows == len(before) + 1  # one deleted, a duplicate and an orphan
    assert _found(report, ProblemKind.MISSING) == {("a", "w0-p1", 2)}
    assert _found(report, ProblemKind.DUPLICATED) == {("b", "w1-p0", 1001)}
    assert _found(report, ProblemKind.MISNUMBERED) == {("a", "w2-p3", n + 1) for n in shifted_nrs}
    assert _found(report, ProblemKind.WRONG_BUCKET) == {("b", "w0-p2", 1)}
    assert _found(report, ProblemKind.ORPHANED) == {("a", "ghost", 1)}
    assert _found(report, ProblemKind.GAP) == {("a", "w0-p1", 2), ("a", "w2-p3", 3)}
    assert report.counts[ProblemKind.MISNUMBERED] == len(shifted_nrs)
    (moved,) = report.of_kind(ProblemKind.WRONG_BUCKET)
    shown = moved.to_json_dict()  # `verify --json` gave epoch millis, `tags --json` ISO-8601
    expected = datetime.fromisoformat(shown["expected_time_bucket"])
    assert expected.utcoffset() == timedelta(0)
    assert datetime.fromisoformat(shown["time_bucket"]) == expected - timedelta(hours=1)
    assert moved.describe().endswith(
        f"in bucket {shown['time_bucket']} (expected {shown['expected_time_bucket']})"
    )
    assert set(report.affected) == {
        ("a", "w0-p1"),
        ("b", "w1-p0"),
        ("a", "w2-p3"),
        ("b", "w0-p2"),
        ("a", "ghost"),
    }

    with stores_at(journal_url) as stores:
        dry = Reconciliation.of(stores).rebuild_pairs(report.affected, dry_run=True)
        assert dry.is_dry_run
        assert dry.written_rows > 0
        Reconciliation.of(stores).rebuild_pairs(report.affected)
    assert tag_view_rows(journal_url) == before
    assert progress_rows(journal_url) == progress  # `ordo verify --repair` verifies again


def test_the_spark_rebuild_equals_what_the_tag_writers_wrote(
    spark: SparkSession, journal_url: str
) -> None:
    write_with_writers(journal_url)
    with open_journal(journal_url, settings=WRITE) as journal:
        journal.delete_to("w1-p2", 4)  # numbering goes on after deleted events
        journal.append("w1-p2", [NewEvent.of("late", tags=["a"])])
    before, progress = tag_view_rows(journal_url), progress_rows(journal_url)
    with stores_at(journal_url) as stores:
        Reconciliation.of(stores).truncate()
    execute(  # the rows of deleted events cannot be rebuilt: keep them aside
        journal_url, "DELETE FROM tag_views WHERE persistence_id = 'x'"
    )

    dry = rebuild_all(spark, journal_url, dry_run=True, partitions=3)
    assert tag_view_rows(journal_url) == set()
    receipt = rebuild_all(spark, journal_url, partitions=3)

    rebuilt = tag_view_rows(journal_url)
    deleted_events = {r for r in before if r[3] == "w1-p2" and r[5] <= 4}
    assert dry.written_rows == receipt.written_rows == len(before) - len(deleted_events)
    assert rebuilt == before - deleted_events
    assert progress_rows(journal_url) == progress
    assert rebuild_all(spark, journal_url, partitions=2).written_rows == len(rebuilt)  # idempotent
    assert tag_view_rows(journal_url) == rebuilt


def test_the_spark_rebuild_is_refused_while_a_writer_is_live(
    spark: SparkSession, journal_url: str
) -> None:
    with open_journal(journal_url, settings=WRITE) as journal:
        journal.append("p", [NewEvent.of(1, tags=["a"])])
        with pytest.raises(ActiveWriterError):
            rebuild_all(spark, journal_url)


def test_ordo_verify_repair_exits_zero_once_repaired(spark: SparkSession, tmp_path: object) -> None:
    url = f"sqlite:///{tmp_path}/journal.db"
    write_with_writers(url, writers=2, pids=2, appends=3)
    row = one_row(url, "a", "w0-p0", 1)
    execute(url, "DELETE FROM tag_views WHERE tag = 'a' AND persistence_id = 'w0-p0'")
    runner = CliRunner()

    found = runner.invoke(cli, ["verify", "--journal", url, "--repair", "--dry-run"])
    assert found.exit_code == 1, found.output
    assert "missing:" in found.stdout
    assert "dry run: would" in found.stdout

    repaired = runner.invoke(cli, ["verify", "--journal", url, "--repair", "--json"])
    assert repaired.exit_code == 0, repaired.output
    document = json.loads(repaired.stdout)
    assert document["report"]["counts"]["missing"] > 0
    assert document["repair"]["written_rows"] > 0
    assert document["after_repair"]["clean"] is True
    assert one_row(url, "a", "w0-p0", 1) == row


def test_verify_refuses_an_older_journal_and_a_repair_upgrades_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    older = tmp_path / "older.db"
    older_journal(older)
    with pytest.raises(SchemaVersionError, match="run `ordo init`"):
        verify_tag_views(spark, str(older))
    runner = CliRunner()
    with pytest.raises(SchemaVersionError, match="run `ordo init`"):
        rebuild_all(spark, str(older), dry_run=True)
    for only_reads in (
        ["verify"],
        ["verify", "--repair", "--dry-run"],
        ["reconcile", "rebuild", "--all", "--dry-run"],
    ):
        refused = runner.invoke(cli, [*only_reads, "--journal", str(older)])
        assert (refused.exit_code, refused.stderr) == (
            1,
            f"Error: SchemaVersionError: journal schema version {LATEST - 1} is older than this "
            f"ordo's ({LATEST}); commands that only read do not upgrade it: run `ordo init`\n",
        )
        assert stored_version(older) == LATEST - 1

    repaired = runner.invoke(cli, ["verify", "--repair", "--journal", str(older)])

    assert repaired.exit_code == 0, repaired.output
    assert stored_version(older) == LATEST


def test_verify_is_clean_once_the_rows_of_deleted_events_are_truncated_and_rebuilt(
    spark: SparkSession, journal_url: str
) -> None:
    """`reconcile rebuild --all --truncate` after a delete_to loses the deleted events' rows.

    The docs say so ("lose them for good"); verify still reported their numbers as a gap of
    every such (tag, persistence id), which no repair can fill: `verify --repair` never passed.
    A row missing for an event still in the journal is still a gap (and missing).
    """
    with open_journal(journal_url, settings=WRITE) as journal:
        journal.append("p", [NewEvent.of(n, tags=["t"]) for n in range(5)])
        journal.append("q", [NewEvent.of(n, tags=["t"]) for n in range(3)])
        journal.flush()
        journal.delete_to("p", 2)
        journal.delete_to("q", 3)
    with stores_at(journal_url) as stores:
        Reconciliation.of(stores).truncate()
    rebuild_all(spark, journal_url, partitions=2)

    assert verify_tag_views(spark, journal_url, partitions=2).is_clean

    execute(journal_url, "DELETE FROM tag_views WHERE persistence_id = 'p' AND sequence_nr = 3")
    report = verify_tag_views(spark, journal_url, partitions=2)
    assert _found(report, ProblemKind.MISSING) == {("t", "p", 3)}
    assert _found(report, ProblemKind.GAP) == {("t", "p", 3)}
    assert [p.count for p in report.of_kind(ProblemKind.GAP)] == [1]


def test_verify_and_the_spark_rebuild_respect_what_an_expiry_deleted(
    spark: SparkSession, journal_url: str
) -> None:
    """The expiry deletes old rows on purpose: verify reported each as missing (so a journal
    with a TTL was never clean, and `--repair` wrote them all back) and a rebuild wrote them
    again. A row deleted by hand after the horizon is still missing; numbers stay the writer's.
    """
    now_ms = time.time_ns() // 10**6
    clock = ManualClock((now_ms - 3 * 3_600_000) * 10**6)
    with open_journal(journal_url, settings=WRITE, clock=clock) as journal:
        journal.append("p", [NewEvent.of(n, tags=["t", "u"]) for n in range(3)])
        clock.advance(3 * 3_600 * 10**9)
        journal.append("p", [NewEvent.of(n, tags=["t", "u"]) for n in range(3, 5)])
    with stores_at(journal_url) as stores:
        cleanup = Cleanup.of(stores)
        assert cleanup.expire(timedelta(hours=1), tag=Tag("t")).deleted == 3
        assert cleanup.delete_tag_views_before(now_ms - 5 * 3_600_000).deleted == 0  # every tag
    expired, progress = tag_view_rows(journal_url), progress_rows(journal_url)
    assert {(r[0], r[4]) for r in expired} == {("t", 4), ("t", 5)} | {("u", n) for n in range(1, 6)}

    assert verify_tag_views(spark, journal_url, partitions=2).is_clean

    execute(journal_url, "DELETE FROM tag_views WHERE persistence_id = 'p' AND sequence_nr = 5")
    report = verify_tag_views(spark, journal_url, partitions=2)
    assert report.counts == {ProblemKind.MISSING: 2}
    assert _found(report, ProblemKind.MISSING) == {("t", "p", 5), ("u", "p", 5)}
    with stores_at(journal_url) as stores:
        Reconciliation.of(stores).rebuild_pairs(report.affected)
        assert tag_view_rows(journal_url) == expired
        Reconciliation.of(stores).truncate()

    assert rebuild_all(spark, journal_url, dry_run=True, partitions=2).written_rows == 7
    assert rebuild_all(spark, journal_url, partitions=2).written_rows == 7
    assert (tag_view_rows(journal_url), progress_rows(journal_url)) == (expired, progress)
