"""ordo processors split, merge, release and reset: steering processors from outside."""

from __future__ import annotations

import json
import sqlite3
import time
from contextlib import closing
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli_support import run as _run
from ordo import NewEvent, open_journal
from ordo.clock import ManualClock
from ordo.processing import TrackingToken
from ordo.processing.segment_request import SegmentAction, SegmentRequest
from ordo.storage.open import stores_at
from ordo.time import TimeUUID
from ordo.types import PersistenceId
from processing_support import FAST, WRITE, counts_processor, wait_for
from sqlite_support import fingerprint, older_journal, stored_version


def test_processors_can_be_inspected_and_steered_offline(runner: CliRunner, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/p.db"
    with stores_at(url) as stores:
        stores.tokens.initialize("counts", segment_count=2)
    code, out, _ = _run(runner, "processors", "status", "--journal", url, "--json")
    assert code == 0
    assert [row["segment"] for row in json.loads(out)] == ["Segment[0/1]", "Segment[1/1]"]
    code, out, _ = _run(runner, "processors", "split", "counts", "1", "--journal", url)
    assert (code, out.strip()) == (0, "split Segment[1/1] into Segment[1/3] and Segment[3/3]")
    code, out, _ = _run(runner, "processors", "merge", "counts", "3", "--journal", url)
    assert (code, out.strip()) == (0, "merged into Segment[1/1]")
    code, out, _ = _run(runner, "processors", "release", "counts", "0", "--journal", url)
    assert code == 0
    assert "not claimed" in out
    code, out, _ = _run(runner, "processors", "reset", "counts", "--journal", url)
    assert code == 0
    assert "reset" in out
    with stores_at(url) as stores:
        assert all(entry.owner is None for entry in stores.tokens.entries("counts"))


def test_a_change_of_a_free_segment_says_it_replaced_the_request_left_there(
    runner: CliRunner, tmp_path: Path
) -> None:
    """A request asked of an owner that stopped before taking it stayed, and the segment's
    next owner carried it out on whatever the segment had become; `release` clears it."""
    url = f"sqlite:///{tmp_path}/p.db"
    with stores_at(url) as stores:
        stores.tokens.initialize("counts", segment_count=2)
        for segment_id in (0, 1):
            stores.tokens.request(
                "counts", segment_id, SegmentRequest(action=SegmentAction.SPLIT), now_ms=0
            )
    code, out, _ = _run(runner, "processors", "release", "counts", "0", "--journal", url)
    assert (code, out.strip()) == (
        0,
        "segment Segment[0/1] is not claimed (withdrew the pending split request)",
    )
    code, out, _ = _run(runner, "processors", "split", "counts", "1", "--journal", url)
    assert (code, out.strip()) == (
        0,
        "split Segment[1/1] into Segment[1/3] and Segment[3/3] "
        "(replacing the pending split request)",
    )
    with stores_at(url) as stores:
        assert stores.tokens.pending_requests("counts") == []


def test_processors_reset_clears_a_projections_positions_in_its_own_sink(
    runner: CliRunner, tmp_path: Path
) -> None:
    """The sink has the positions but no tokens: a reset of the journal left them, and one of
    the sink said the processor had no tokens."""
    journal, sink = f"sqlite:///{tmp_path}/j.db", f"sqlite:///{tmp_path}/sink.db"
    processed = TimeUUID.min_for_epoch_ns(1_700_000_000_000_000_000)
    with stores_at(journal) as stores:
        stores.tokens.initialize("totals", segment_count=1)
        stores.tokens.advance_unclaimed("totals", processed, now_ms=0, claim_timeout_ms=1)
    with stores_at(sink) as stores, stores.tokens.batch("totals", 0, "spark") as batch:
        batch.record(PersistenceId("order-1"), 2)

    def tokens_and_positions() -> tuple[list[str], dict[PersistenceId, int]]:
        with stores_at(journal) as at_journal, stores_at(sink) as at_sink:
            entries = at_journal.tokens.entries("totals")
            return [str(e.token) for e in entries], dict(at_sink.tokens.positions("totals"))

    before = tokens_and_positions()
    other = f"sqlite:///{tmp_path}/other.db"
    with stores_at(other):
        pass  # an ordo database without the processor
    for wrong, error in (
        (
            f"sqlite:///{tmp_path}/sinc.db",
            f"StorageUnavailableError: no sink database at {tmp_path}/sinc.db: "
            "is the path misspelt?\n",
        ),
        (other, "UnknownProcessorError: the sink: processor 'totals' has no tokens"),
    ):
        code, out, err = _run(
            runner, "processors", "reset", "totals", "--journal", journal, "--sink", wrong
        )
        assert (code, out, err.count("\n")) == (1, "", 1)
        assert err.startswith(f"Error: {error}")
        assert tokens_and_positions() == before
    assert not (tmp_path / "sinc.db").exists()

    code, out, _ = _run(
        runner, "processors", "reset", "totals", "--journal", journal, "--sink", sink
    )

    assert (code, out.strip()) == (
        0,
        "reset 'totals' to start and cleared its positions in the sink; "
        "events processed before are replays",
    )
    assert tokens_and_positions() == (["start"], {})


def test_processors_reset_run_again_after_a_partial_reset_finishes_it(
    runner: CliRunner, tmp_path: Path
) -> None:
    """The journal held only positions of the processor, which the first run cleared before
    the sink refused its part: the same command run again, as the error says to, was refused
    as having nothing to reset in the journal."""
    journal, sink = f"sqlite:///{tmp_path}/j.db", f"sqlite:///{tmp_path}/sink.db"
    for url in (journal, sink):
        with stores_at(url) as stores, stores.tokens.batch("totals", 0, "spark") as batch:
            batch.record(PersistenceId("order-1"), 2)
    refusing = "CREATE TRIGGER refuse BEFORE DELETE ON processed_positions BEGIN "
    with closing(sqlite3.connect(tmp_path / "sink.db")) as conn, conn:
        conn.execute(refusing + "SELECT RAISE(ABORT, 'the sink refuses'); END")
    reset = ("processors", "reset", "totals", "--journal", journal, "--sink", sink)

    def positions() -> tuple[dict[PersistenceId, int], dict[PersistenceId, int]]:
        with stores_at(journal) as at_journal, stores_at(sink) as at_sink:
            in_journal, in_sink = (s.tokens.positions("totals") for s in (at_journal, at_sink))
            return dict(in_journal), dict(in_sink)

    code, out, err = _run(runner, *reset)

    assert (code, out) == (1, "")
    assert err.startswith(
        "Error: PartialResetError: processor 'totals' was reset in the journal but not in the "
        "sink (SQLite constraint failed: the sink refuses)"
    )
    assert positions() == ({}, {"order-1": 2})
    with closing(sqlite3.connect(tmp_path / "sink.db")) as conn, conn:
        conn.execute("DROP TRIGGER refuse")

    code, out, _ = _run(runner, *reset)

    assert (code, out) == (
        0,
        "cleared the positions of 'totals' in the sink (the journal holds no tokens or "
        "positions of it); events processed before are replays\n",
    )
    assert positions() == ({}, {})


@pytest.mark.postgres
def test_processors_reset_names_a_missing_postgres_sink_as_the_sink(
    runner: CliRunner, tmp_path: Path, postgres_dsn: str
) -> None:
    """It said "no ordo journal ...: create it with `ordo init`" of the sink."""
    journal = f"sqlite:///{tmp_path}/j.db"
    processed = TimeUUID.min_for_epoch_ns(1_700_000_000_000_000_000)
    with stores_at(journal) as stores:
        stores.tokens.initialize("totals", segment_count=1)
        stores.tokens.advance_unclaimed("totals", processed, now_ms=0, claim_timeout_ms=1)

    code, out, err = _run(
        runner, "processors", "reset", "totals", "--journal", journal, "--sink", postgres_dsn
    )

    assert (code, out, err.count("\n")) == (1, "", 1)
    assert err.startswith("Error: StorageUnavailableError: no ordo sink database in PostgreSQL at")
    assert "ordo init" not in err
    with stores_at(journal) as stores:
        assert stores.tokens.entries("totals")[0].token == TrackingToken(processed)


def test_a_request_that_replaces_a_pending_one_says_so(runner: CliRunner, tmp_path: Path) -> None:
    """A segment holds one request: a release dropped a pending split, saying only "release"."""
    url = f"sqlite:///{tmp_path}/p.db"
    with stores_at(url) as stores:
        stores.tokens.initialize("counts", segment_count=2)
        stores.tokens.claim(
            "counts", 1, "worker-1", now_ms=time.time_ns() // 1_000_000, claim_timeout_ms=1
        )
    steer = ("counts", "1", "--journal", url)
    code, out, _ = _run(runner, "processors", "split", *steer)
    assert (code, out) == (0, "asked worker-1 to split segment Segment[1/1]\n")
    code, out, _ = _run(runner, "processors", "release", *steer)
    assert (code, out) == (
        0,
        "asked worker-1 to release Segment[1/1] (replacing the pending split request)\n",
    )
    code, out, _ = _run(runner, "processors", "release", *steer)
    assert (code, out) == (0, "asked worker-1 to release Segment[1/1]\n")
    code, out, _ = _run(runner, "processors", "merge", *steer)
    assert out.startswith("asked worker-1 to merge Segment[1/1] with its sibling (replacing the ")
    assert out.endswith("release request)\n")


def test_a_request_that_would_replace_a_hand_over_is_refused_unless_told_to(
    runner: CliRunner, tmp_path: Path
) -> None:
    """The owner of segment 0, merging, asked the owner of segment 1 to hand it over: a
    release replaced that, and the merge was held up with only the receipt to say so."""
    url = f"sqlite:///{tmp_path}/p.db"
    with stores_at(url) as stores:
        stores.tokens.initialize("counts", segment_count=2)
        stores.tokens.claim(
            "counts", 1, "worker-1", now_ms=time.time_ns() // 1_000_000, claim_timeout_ms=60_000
        )
        hand_over = SegmentRequest(action=SegmentAction.HAND_OVER, target_owner="worker-0")
        stores.tokens.request("counts", 1, hand_over, now_ms=0)
    steer = ("counts", "1", "--journal", url)
    code, out, err = _run(runner, "processors", "release", *steer)
    assert (code, out) == (1, "")
    assert err == (
        "Error: PendingHandOverError: processor 'counts' segment 1 is waiting for its owner to "
        "hand it over to 'worker-0' for a merge: a release request would replace that and hold "
        "the merge up (--replace-hand-over, or replace_hand_over=True, replaces it anyway)\n"
    )
    code, out, _ = _run(runner, "processors", "status", "--journal", url)
    assert "hand over to worker-0 requested" in out
    code, out, _ = _run(runner, "processors", "release", *steer, "--replace-hand-over")
    assert (code, out) == (
        0,
        "asked worker-1 to release Segment[1/1] (replacing the pending hand over to worker-0 "
        "request)\n",
    )


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["processors", "status", "nobody"], "UnknownProcessorError"),
        (["processors", "merge", "counts", "0"], "InvalidSegmentOperationError"),
        (["processors", "split", "counts", "9"], "UnknownSegmentError: processor 'counts' has no"),
        (
            ["processors", "reset", "counts", "--to", "bad"],
            "OffsetFormatError: --to 'bad' is neither a TimeUUID nor an ISO-8601 time",
        ),
        (
            ["processors", "reset", "counts", "--to", "12345678-1234-1234-1234-123456789012"],
            "FutureOffsetError: offset 12345678-1234-1234-1234-123456789012 (2085-11-29",
        ),
        (
            ["processors", "reset", "counts", "--to", "2024-05-01T10:00:00"],
            "OffsetFormatError: --to '2024-05-01T10:00:00' has no zone; add one (e.g. +00:00)",
        ),
        (
            ["processors", "reset", "counts", "--to", "2085-11-29T10:00:00+02:00"],
            f"FutureOffsetError: offset {TimeUUID.min_for_epoch_ns(3_657_859_200 * 10**9)} "
            "(2085-11-29T08:00:00+00:00) is in the future",
        ),
    ],
)
def test_processor_commands_refuse_bad_input(
    runner: CliRunner, tmp_path: Path, args: list[str], needle: str
) -> None:
    url = f"sqlite:///{tmp_path}/p.db"
    with stores_at(url) as stores:
        stores.tokens.initialize("counts", segment_count=1)
        before = stores.tokens.entries("counts")
    code, _, err = _run(runner, *args, "--journal", url)
    assert code == 1
    assert needle in err
    with stores_at(url) as stores:
        assert stores.tokens.entries("counts") == before


def test_a_reset_to_a_future_offset_leaves_the_journal_and_the_sink_as_they_were(
    runner: CliRunner, tmp_path: Path
) -> None:
    """The offset was refused once the sink and the journal were open for writing: an older
    journal was upgraded and a sink in rollback mode switched to WAL by a command that then
    changed nothing, though the offset alone says it is refused."""
    journal, sink = tmp_path / "older.db", tmp_path / "sink.db"
    older_journal(journal)
    with stores_at(f"sqlite:///{sink}"):
        pass
    with closing(sqlite3.connect(sink)) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
    before = [(fingerprint(path), stored_version(path)) for path in (journal, sink)]
    future = TimeUUID.min_for_epoch_ns(time.time_ns() + 365 * 24 * 3600 * 10**9)
    code, out, err = _run(
        runner,
        *("processors", "reset", "counts", "--to", str(future)),
        *("--journal", str(journal), "--sink", f"sqlite:///{sink}"),
    )
    assert (code, out) == (1, "")
    assert err.startswith(f"Error: FutureOffsetError: offset {future} (")
    assert [(fingerprint(path), stored_version(path)) for path in (journal, sink)] == before


def test_a_reset_refused_while_the_processor_runs_leaves_the_journal_and_the_sink_as_they_were(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The running processor was found only once both were open for writing: a journal and a
    sink in rollback mode were switched to WAL by a command that then changed nothing."""
    journal, sink = tmp_path / "journal.db", tmp_path / "sink.db"
    with stores_at(f"sqlite:///{journal}") as stores:
        stores.tokens.initialize("counts", segment_count=1)
        stores.tokens.claim(
            "counts", 0, "w", now_ms=time.time_ns() // 1_000_000, claim_timeout_ms=60_000
        )
    with stores_at(f"sqlite:///{sink}"):
        pass
    for path in (journal, sink):
        with closing(sqlite3.connect(path)) as conn:
            conn.execute("PRAGMA journal_mode=DELETE")
    before = [fingerprint(path) for path in (journal, sink)]
    monkeypatch.setenv("ORDO_CLAIM_TIMEOUT_MS", "60000")

    code, out, err = _run(
        runner,
        *(
            "processors",
            "reset",
            "counts",
            "--journal",
            str(journal),
            "--sink",
            f"sqlite:///{sink}",
        ),
    )

    assert (code, out) == (1, "")
    assert "is running" in err or "claimed" in err, err
    assert [fingerprint(path) for path in (journal, sink)] == before


@pytest.mark.parametrize("before_ns", [0, 1_000], ids=["at-the-later-event", "between-the-two"])
@pytest.mark.parametrize("ran", [True, False], ids=["processed-both", "never-ran"])
def test_a_reset_to_a_time_handles_the_events_from_that_instant_on(
    runner: CliRunner, tmp_path: Path, before_ns: int, ran: bool
) -> None:
    """`--to` took only a TimeUUID, though `query --offset` takes a time too (Axon's
    resetTokens(tokenAt(instant))): a user had to compute one for "10:00 this morning".

    The time's token is the smallest TimeUUID at that instant, below the event written then:
    of two events 2 us apart, a reset to the later one's instant or to the microsecond between
    them hands on the later one only, as a replay if the processor had handled it. The
    earlier one lies within back_track_period (2 s here) before the token, where the
    segment's stream started: the reset had cleared its position (or the processor never had
    one), and it was handled again.
    """
    url = f"sqlite:///{tmp_path}/j.db"
    later_ns = (time.time_ns() - 60 * 10**9) // 1_000 * 1_000  # settled, on a microsecond
    clock = ManualClock(later_ns - 2_000)
    with open_journal(url, settings=WRITE, clock=clock) as journal:
        journal.append("earlier", [NewEvent.of(1, tags=["t"])])
        clock.advance(2_000)
        journal.append("later", [NewEvent.of(2, tags=["t"])])

    def sql(statement: str) -> list[tuple[object, ...]]:
        with closing(sqlite3.connect(tmp_path / "j.db")) as conn, conn:
            return conn.execute(statement).fetchall()

    def counts() -> list[tuple[object, ...]]:
        """(pid, events handled, last tag pid sequence nr, replays) of each persistence id."""
        return sorted(sql("SELECT pid, n, last, replays FROM counts"))

    def run_until_the_later_event_is_handled() -> None:
        # One segment reads the events in offset order: the earlier one, if delivered, first.
        with (
            stores_at(url) as stores,
            counts_processor(stores, settings=replace(FAST, initial_segment_count=1)),
        ):
            wait_for(lambda: "later" in {row[0] for row in counts()})

    sql(
        "CREATE TABLE counts (pid TEXT PRIMARY KEY, n BIGINT NOT NULL, last BIGINT NOT NULL, "
        "replays BIGINT NOT NULL)"
    )
    if ran:
        run_until_the_later_event_is_handled()
        assert counts() == [("earlier", 1, 1, 0), ("later", 1, 1, 0)]
        sql("DELETE FROM counts")
    else:
        with stores_at(url) as stores:
            stores.tokens.initialize("counts", segment_count=1)
    instant = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(
        microseconds=(later_ns - before_ns) // 1_000
    )

    code, out, err = _run(
        runner, "processors", "reset", "counts", "--to", instant.isoformat(), "--journal", url
    )

    assert (code, err) == (0, "")
    token = TimeUUID.from_datetime(instant)
    assert out == f"reset 'counts' to {token}; events processed before are replays\n"
    run_until_the_later_event_is_handled()
    assert counts() == [("later", 1, 1, int(ran))]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["split", "nobody", "0"], "UnknownProcessorError: processor 'nobody' has no tokens"),
        (["release", "counts", "9"], "UnknownSegmentError: processor 'counts' has no segment 9"),
        (["merge", "counts", "0"], "InvalidSegmentOperationError: processor 'counts': the root"),
    ],
)
def test_a_refused_split_merge_or_release_leaves_the_journal_as_it_was(
    runner: CliRunner, tmp_path: Path, args: list[str], needle: str
) -> None:
    """What was asked of a processor or segment that is not there was refused only once the
    journal was open for writing: a journal in rollback mode was switched to WAL by a command
    that then changed nothing (as `reset` did, before it checked on the journal only read)."""
    journal = tmp_path / "journal.db"
    with stores_at(f"sqlite:///{journal}") as stores:
        stores.tokens.initialize("counts", segment_count=1)
    with closing(sqlite3.connect(journal)) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
    before = fingerprint(journal)

    code, out, err = _run(runner, "processors", *args, "--journal", str(journal))

    assert (code, out) == (1, "")
    assert err.startswith(f"Error: {needle}"), err
    assert fingerprint(journal) == before
