"""Reconciliation on both backends: delete, rebuild, tags, truncate, dry runs, the guard."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from itertools import islice

import pytest

from operations_support import (
    WRITE,
    execute,
    one_row,
    progress_rows,
    tag_view_rows,
    write_with_writers,
)
from ordo import NewEvent, QuerySettings, open_journal
from ordo.errors import ActiveWriterError, InvalidIdentifierError
from ordo.storage.open import events_by_tag_at, stores_at
from ordo.storage.stores import Stores
from ordo.tools.receipts import OperationReceipt
from ordo.tools.reconciliation import Reconciliation
from ordo.types import PersistenceId, Tag

READ = QuerySettings(
    eventual_consistency_delay=timedelta(milliseconds=100),
    refresh_interval=timedelta(milliseconds=50),
)


@pytest.fixture
def written(journal_url: str) -> Iterator[Stores]:
    """A journal written by three writers, all of them closed (no live lease)."""
    write_with_writers(journal_url)
    with stores_at(journal_url) as stores:
        yield stores


def test_delete_then_rebuild_restores_the_same_rows_and_progress(
    journal_url: str, written: Stores
) -> None:
    before, progress = tag_view_rows(journal_url), progress_rows(journal_url)
    reconciliation = Reconciliation.of(written)
    pid = PersistenceId("w1-p2")
    assert reconciliation.tags_of(pid) == ["a", "b"]

    deleted = reconciliation.delete_tag_views(pid)
    assert deleted.deleted.tag_view_rows == sum(1 for r in before if r[3] == pid)
    assert deleted.deleted.progress_rows == 2
    assert not any(r[3] == pid for r in tag_view_rows(journal_url))

    rebuilt = reconciliation.rebuild_tag_views(pid)
    assert rebuilt.written_rows == deleted.deleted.tag_view_rows
    assert tag_view_rows(journal_url) == before
    assert progress_rows(journal_url) == progress


def test_rebuild_of_one_tag_repairs_shifted_numbers_and_leaves_other_tags(
    journal_url: str, written: Stores
) -> None:
    before = tag_view_rows(journal_url)
    execute(
        journal_url,
        "UPDATE tag_views SET tag_pid_sequence_nr = tag_pid_sequence_nr + 1 "
        "WHERE tag = 'a' AND persistence_id = 'w0-p0'",
    )
    assert tag_view_rows(journal_url) != before

    receipt = Reconciliation.of(written).rebuild_tag_views(PersistenceId("w0-p0"), tag=Tag("a"))
    assert receipt.tags == ("a",)
    assert tag_view_rows(journal_url) == before


def test_a_recovered_writer_rebuilds_deleted_tag_views_with_the_same_numbers(
    journal_url: str, written: Stores
) -> None:
    before = tag_view_rows(journal_url)
    Reconciliation.of(written).delete_tag_views(PersistenceId("w2-p1"), tag=Tag("b"))
    with open_journal(journal_url, settings=WRITE) as journal:
        journal.recover("w2-p1")
    assert tag_view_rows(journal_url) == before


def test_dry_runs_report_and_change_nothing(journal_url: str, written: Stores) -> None:
    before, progress = tag_view_rows(journal_url), progress_rows(journal_url)
    reconciliation = Reconciliation.of(written)
    pid = PersistenceId("w0-p1")

    deleting = reconciliation.delete_tag_views(pid, dry_run=True)
    rebuilding = reconciliation.rebuild_tag_views(pid, dry_run=True)
    truncating = reconciliation.truncate(dry_run=True)
    everything = reconciliation.rebuild_all_locally(dry_run=True)

    rows_of_pid = sum(1 for r in before if r[3] == pid)
    assert deleting.is_dry_run
    assert deleting.deleted.tag_view_rows == rows_of_pid
    assert rebuilding.written_rows == rows_of_pid
    assert truncating.deleted.tag_view_rows == len(before)
    assert everything.written_rows == len(before)
    assert "would" in deleting.describe()
    assert tag_view_rows(journal_url) == before
    assert progress_rows(journal_url) == progress


def test_unknown_persistence_ids_and_tags_are_nothing_to_do(
    journal_url: str, written: Stores
) -> None:
    before = tag_view_rows(journal_url)
    reconciliation = Reconciliation.of(written)
    for receipt in (
        reconciliation.delete_tag_views(PersistenceId("nobody")),
        reconciliation.rebuild_tag_views(PersistenceId("nobody")),
        reconciliation.delete_tag_views(PersistenceId("w0-p0"), tag=Tag("no-such-tag")),
        reconciliation.rebuild_pairs([]),
    ):
        assert receipt.is_noop
        assert "nothing to do" in receipt.describe()
    assert reconciliation.tags_of(PersistenceId("nobody")) == []
    assert tag_view_rows(journal_url) == before


def test_empty_ids_and_tags_are_refused_not_nothing_to_do(
    journal_url: str, written: Stores
) -> None:
    before = tag_view_rows(journal_url)
    reconciliation = Reconciliation.of(written)
    calls: list[Callable[[], object]] = [
        lambda: reconciliation.delete_tag_views(PersistenceId("")),
        lambda: reconciliation.rebuild_tag_views(PersistenceId("a\x00b")),
        lambda: reconciliation.delete_tag_views(PersistenceId("w0-p0"), tag=Tag("")),
        lambda: reconciliation.tags_of(PersistenceId("")),
    ]
    for call in calls:
        with pytest.raises(InvalidIdentifierError):
            call()
    assert tag_view_rows(journal_url) == before


def test_truncate_then_rebuild_all_gives_what_the_tag_writers_wrote(
    journal_url: str, written: Stores
) -> None:
    before, progress = tag_view_rows(journal_url), progress_rows(journal_url)
    reconciliation = Reconciliation.of(written)
    truncated = reconciliation.truncate()
    assert truncated.deleted.tag_view_rows == len(before)
    assert tag_view_rows(journal_url) == set()

    rebuilt = reconciliation.rebuild_all_locally()
    assert rebuilt.written_rows == len(before)
    assert tag_view_rows(journal_url) == before
    assert progress_rows(journal_url) == progress


def test_rows_of_events_deleted_from_the_journal_are_kept_by_a_rebuild(
    journal_url: str, written: Stores
) -> None:
    with open_journal(journal_url, settings=WRITE) as journal:
        journal.delete_to("w1-p1", 3)
    before = tag_view_rows(journal_url)
    reconciliation = Reconciliation.of(written)
    reconciliation.rebuild_tag_views(PersistenceId("w1-p1"))
    assert tag_view_rows(journal_url) == before
    execute(journal_url, "DELETE FROM tag_views WHERE persistence_id = 'w1-p1' AND sequence_nr > 3")
    reconciliation.rebuild_tag_views(PersistenceId("w1-p1"))
    assert tag_view_rows(journal_url) == before


def test_a_rebuild_keeps_the_numbering_of_a_tag_only_deleted_events_had(
    journal_url: str,
) -> None:
    """Events 1-3 (tag t) deleted, event 4 tagged u: the rebuild deleted t's progress.

    The next event tagged t was then numbered 1 again, beside the kept rows 1-3: a query that
    had delivered t up to 3 took it for one it had seen. Progress beyond the kept rows (stale)
    is still dropped, and a damaged progress is derived again from the kept rows.
    """
    with open_journal(journal_url, settings=WRITE) as journal:
        journal.append("p", [NewEvent.of(n, tags=["t"]) for n in range(3)])
        journal.append("p", [NewEvent.of(3, tags=["u"])])
        journal.flush()
        journal.delete_to("p", 3)
    progress = progress_rows(journal_url)
    with stores_at(journal_url) as stores:
        reconciliation = Reconciliation.of(stores)
        reconciliation.rebuild_tag_views(PersistenceId("p"))
        assert progress_rows(journal_url) == progress
        execute(journal_url, "UPDATE tag_write_progress SET sequence_nr = 9 WHERE tag = 't'")
        reconciliation.rebuild_tag_views(PersistenceId("p"), tag=Tag("t"))
        assert progress_rows(journal_url) == progress
    with open_journal(journal_url, settings=WRITE) as journal:
        journal.append("p", [NewEvent.of(4, tags=["t"])])
        journal.flush()
    assert one_row(journal_url, "t", "p", 4)[5] == 5  # sequence nr 5 is t's 4th event


RECONCILIATIONS: dict[str, Callable[[Reconciliation], object]] = {
    "delete, then recovery": lambda r: r.delete_tag_views(PersistenceId("p")),
    "delete, then rebuild": lambda r: (
        r.delete_tag_views(PersistenceId("p")),
        r.rebuild_tag_views(PersistenceId("p")),
    ),
    "truncate, then recovery": lambda r: r.truncate(),
    "truncate, then rebuild --all": lambda r: (r.truncate(), r.rebuild_all_locally()),
}


@pytest.mark.parametrize("reconcile", RECONCILIATIONS.values(), ids=RECONCILIATIONS.keys())
def test_a_query_delivers_a_tag_only_deleted_events_had_after_its_views_are_deleted(
    journal_url: str, reconcile: Callable[[Reconciliation], object]
) -> None:
    """Events 1-3 of p (tag t) delivered by a live query, then deleted from the journal.

    Deleting p's tag views (or truncating them) deleted t's progress with its rows, and no
    event left in the journal has t: recovery, a rebuild or a rebuild --all numbered p's next
    event of t 1 again, and the query, which had delivered t up to 3, dropped it as a duplicate
    (q's event, appended after it, came first).
    """
    start = datetime.now(UTC) - timedelta(seconds=1)
    with open_journal(journal_url, settings=WRITE) as journal:
        journal.append("p", [NewEvent.of(n, tags=["t"]) for n in range(3)])
        journal.flush()
        journal.delete_to("p", 3)
    with events_by_tag_at(journal_url, settings=READ) as queries, queries.live("t", start) as live:
        assert [e.tag_pid_sequence_nr for e in islice(live, 3)] == [1, 2, 3]
        with stores_at(journal_url) as stores:
            reconcile(Reconciliation.of(stores))
        with open_journal(journal_url, settings=WRITE) as journal:
            journal.append("p", [NewEvent.of(3, tags=["t"])])
            journal.append("q", [NewEvent.of("after p", tags=["t"])])
        following = next(live)
    assert (following.persistence_id, following.sequence_nr) == ("p", 4)
    assert following.tag_pid_sequence_nr == 4


def test_deletions_keep_and_do_not_count_the_progress_of_deleted_events(
    journal_url: str,
) -> None:
    """Events 1-3 of p (tag t) deleted, event 4 tagged u: t's progress names a deleted event.

    A delete and a truncate keep it (and their dry runs do not count it as deleted); u's
    progress, whose event recovery writes again, goes with the rows.
    """
    with open_journal(journal_url, settings=WRITE) as journal:
        journal.append("p", [NewEvent.of(n, tags=["t"]) for n in range(3)])
        journal.append("p", [NewEvent.of(3, tags=["u"])])
        journal.flush()
        journal.delete_to("p", 3)
    kept = {row for row in progress_rows(journal_url) if row[1] == "t"}
    with stores_at(journal_url) as stores:
        reconciliation = Reconciliation.of(stores)
        deletions: list[Callable[..., OperationReceipt]] = [
            partial(reconciliation.delete_tag_views, PersistenceId("p")),
            reconciliation.truncate,
        ]
        for delete in deletions:
            counted, deleted = delete(dry_run=True), delete(dry_run=False)
            assert counted.deleted.progress_rows == deleted.deleted.progress_rows == 1
            assert progress_rows(journal_url) == kept
            with open_journal(journal_url, settings=WRITE) as journal:
                journal.recover("p")  # writes u's row and progress again


def test_a_pair_given_twice_is_rebuilt_once(journal_url: str, written: Stores) -> None:
    """It was replaced twice, and its rows were counted twice as deleted and as written."""
    rows = sum(1 for r in tag_view_rows(journal_url) if r[0] == "a" and r[3] == "w0-p0")
    pair = (Tag("a"), PersistenceId("w0-p0"))
    reconciliation = Reconciliation.of(written)
    dry = reconciliation.rebuild_pairs([pair, pair], dry_run=True)
    done = reconciliation.rebuild_pairs([pair, pair])
    assert (dry.deleted.tag_view_rows, dry.written_rows) == (rows, rows)
    assert (done.deleted.tag_view_rows, done.written_rows) == (rows, rows)


def test_the_active_writer_guard_refuses_and_force_overrides(journal_url: str) -> None:
    with open_journal(journal_url, settings=WRITE) as journal:
        journal.append("busy", [NewEvent.of(1, tags=["a"])])
        journal.append("other", [NewEvent.of(2, tags=["a"])])
        journal.flush()
        with stores_at(journal_url) as stores:
            reconciliation = Reconciliation.of(stores)
            before = tag_view_rows(journal_url)
            attempts: list[Callable[[], object]] = [
                lambda: reconciliation.delete_tag_views(PersistenceId("busy")),
                lambda: reconciliation.delete_tag_views(PersistenceId("busy"), dry_run=True),
                lambda: reconciliation.rebuild_tag_views(PersistenceId("busy")),
                lambda: reconciliation.rebuild_pairs([(Tag("a"), PersistenceId("busy"))]),
                reconciliation.truncate,
                reconciliation.rebuild_all_locally,
            ]
            for attempt in attempts:
                with pytest.raises(ActiveWriterError) as refused:
                    attempt()
                assert journal.writer_uuid in str(refused.value)
            assert tag_view_rows(journal_url) == before

            forced = reconciliation.delete_tag_views(PersistenceId("busy"), force=True)
            assert forced.forced_past == {"busy": (journal.writer_uuid,)}
            assert forced.deleted.tag_view_rows == 1
    with stores_at(journal_url) as stores:  # the journal closed: its lease is gone
        receipt = Reconciliation.of(stores).rebuild_tag_views(PersistenceId("busy"))
        assert receipt.written_rows == 1
        assert not receipt.forced_past
    one_row(journal_url, "a", "busy", 1)


def test_a_refusal_of_the_whole_journal_names_no_persistence_id(journal_url: str) -> None:
    """A truncate refused under a live writer said "leases on persistence_id '*'"."""
    with open_journal(journal_url, settings=WRITE) as journal:
        journal.append("busy", [NewEvent.of(1, tags=["a"])])
        with stores_at(journal_url) as stores, pytest.raises(ActiveWriterError) as refused:
            Reconciliation.of(stores).truncate()
    assert str(refused.value) == (
        f"truncate tag views refused: live writers hold leases (writer {journal.writer_uuid}) "
        "and it changes every persistence id; stop them or pass --force (force=True)"
    )
