"""`ordo query --live` across outages of the journal, made by failing the query's reads."""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from ordo import NewEvent, open_journal
from ordo.cli import query as query_command
from ordo.cli.root import cli
from ordo.errors import StorageUnavailableError
from ordo.query import EventEnvelope, Step, TagQuery
from ordo.settings import EventsByTagSettings
from ordo.time import format_first_time_bucket


def test_a_second_outage_after_reads_of_nothing_warns_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Each outage logs its WARNING and starts the backoff at 0.1 s again.

    Between the two outages a read succeeds but finds nothing (a quiet tag), so next() does
    not return: before, the command saw one long outage, warned once and waited 0.2 s.
    """
    url = f"sqlite:///{tmp_path}/q.db"
    first_bucket = format_first_time_bucket(time.time_ns() // 10**6)
    monkeypatch.setenv("ORDO_FIRST_TIME_BUCKET", first_bucket)
    monkeypatch.setenv("ORDO_EVENTUAL_CONSISTENCY_DELAY_MS", "0")
    monkeypatch.setenv("ORDO_REFRESH_INTERVAL_MS", "10")
    settings = EventsByTagSettings(first_time_bucket=first_bucket)

    def append(i: int) -> None:
        with open_journal(url, settings=settings) as journal:
            journal.append(f"p{i}", [NewEvent.of({"i": i}, tags=["t"])])

    append(1)
    real_poll = TagQuery.poll
    polls = 0

    def poll(self: TagQuery[EventEnvelope], now_ns: int) -> Step[EventEnvelope]:
        nonlocal polls
        polls += 1
        if polls == 4:
            append(2)  # written during the second outage
        if polls in (2, 4):
            msg = f"the journal is down (poll {polls})"
            raise StorageUnavailableError(msg)
        return real_poll(self, now_ns)  # 1: event 1; 3: nothing new; 5: event 2

    waits: list[float] = []
    monkeypatch.setattr(TagQuery, "poll", poll)
    monkeypatch.setattr(query_command, "time", SimpleNamespace(sleep=waits.append))
    caplog.set_level(logging.WARNING, logger="ordo")
    result = CliRunner().invoke(
        cli, ["query", "t", "--journal", url, "--live", "--limit", "2", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["payload"]["i"] for line in result.stdout.splitlines()] == [1, 2]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings
    assert "poll 2" in warnings[0]
    assert "poll 4" in warnings[1]
    assert waits == [0.1, 0.1]


def test_a_folder_made_beside_the_journal_ends_the_live_query_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A `-journal` folder made beside a journal in rollback mode (a `VACUUM INTO` backup) fails
    every read with "disk I/O error". As StorageUnavailableError the command took it for an
    outage and retried it for ever, a WARNING first; no retry mends it until the folder goes.
    """
    first_bucket = format_first_time_bucket(time.time_ns() // 10**6)
    monkeypatch.setenv("ORDO_FIRST_TIME_BUCKET", first_bucket)
    monkeypatch.setenv("ORDO_EVENTUAL_CONSISTENCY_DELAY_MS", "0")
    monkeypatch.setenv("ORDO_REFRESH_INTERVAL_MS", "10")
    settings = EventsByTagSettings(first_time_bucket=first_bucket)
    with open_journal(f"sqlite:///{tmp_path}/j.db", settings=settings) as journal:
        journal.append("p1", [NewEvent.of({"i": 1}, tags=["t"])])
    backup = tmp_path / "backup.db"
    with closing(sqlite3.connect(tmp_path / "j.db")) as conn:
        conn.execute("VACUUM INTO ?", (str(backup),))
    before = backup.read_bytes()
    beside = Path(f"{backup}-journal")
    real_poll = TagQuery.poll
    polls = 0

    def poll(self: TagQuery[EventEnvelope], now_ns: int) -> Step[EventEnvelope]:
        nonlocal polls
        polls += 1
        if polls == 2:  # after event 1 was read
            beside.mkdir()
        if polls > 2:
            msg = "the live query read again after the folder was made"
            raise AssertionError(msg)
        return real_poll(self, now_ns)

    waits: list[float] = []
    monkeypatch.setattr(TagQuery, "poll", poll)
    monkeypatch.setattr(query_command, "time", SimpleNamespace(sleep=waits.append))
    caplog.set_level(logging.WARNING, logger="ordo")
    result = CliRunner().invoke(
        cli, ["query", "t", "--journal", str(backup), "--live", "--limit", "2", "--json"]
    )

    assert result.exit_code == 1, result.output
    assert [json.loads(line)["payload"]["i"] for line in result.stdout.splitlines()] == [1]
    assert result.stderr == (
        f"Error: StorageAccessError: SQLite database {backup} cannot be used: disk I/O error "
        f"({beside} is a folder, not the -journal file SQLite keeps beside it)\n"
    )
    assert (polls, waits, caplog.records) == (2, [], [])
    assert backup.read_bytes() == before
