"""ordo query: reading a tag in offset order, from an offset, live, and saying why not."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli_support import run as _run
from ordo.time import format_first_time_bucket


def test_query_reads_a_tag_in_offset_order(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _read_at_once(tmp_path, monkeypatch)
    monkeypatch.setenv("ORDO_FLUSH_INTERVAL_MS", "0")
    lines = "\n".join(
        json.dumps({"persistence_id": f"p{i % 2}", "payload": {"i": i}, "tags": ["t"]})
        for i in range(5)
    )
    assert _run(runner, "append", "--journal", url, stdin=lines)[0] == 0
    code, out, err = _run(runner, "query", "t", "--journal", url, "--json")
    assert code == 0, err
    delivered = [json.loads(line) for line in out.splitlines()]
    assert [e["payload"]["i"] for e in delivered] == [0, 1, 2, 3, 4]
    assert [e["tag_pid_sequence_nr"] for e in delivered] == [1, 1, 2, 2, 3]
    code, out, _ = _run(
        runner, "query", "t", "--journal", url, "--json", "--offset", delivered[1]["offset"]
    )
    assert [json.loads(line)["payload"]["i"] for line in out.splitlines()] == [2, 3, 4]
    code, out, _ = _run(runner, "query", "t", "--journal", url, "--live", "--limit", "2")
    assert code == 0
    assert len(out.splitlines()) == 2


def test_query_help_says_its_json_is_one_object_per_event(runner: CliRunner) -> None:
    """It said "one JSON document", but a query (a live one never ends) prints JSON lines."""
    code, out, _ = _run(runner, "query", "--help")
    assert code == 0
    assert "one JSON document" not in out
    assert "Print one JSON object per event, one per line (JSON lines)." in " ".join(out.split())


def _read_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The URL of a journal file in `tmp_path`, queried from this bucket with no consistency
    delay (the settings through the environment, as a user sets them)."""
    monkeypatch.setenv("ORDO_FIRST_TIME_BUCKET", format_first_time_bucket(time.time_ns() // 10**6))
    monkeypatch.setenv("ORDO_EVENTUAL_CONSISTENCY_DELAY_MS", "0")
    return f"sqlite:///{tmp_path}/q.db"


def _one_event_settled_at_once(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """A journal holding event p#1 of tag t, read with no consistency delay from this bucket."""
    url = _read_at_once(tmp_path, monkeypatch)
    line = json.dumps({"persistence_id": "p", "payload": {}, "tags": ["t"]})
    assert _run(runner, "append", "--journal", url, stdin=line)[0] == 0
    return url


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_python_m_runs_the_cli_and_ctrl_c_or_sigterm_ends_a_live_query_quietly(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop: signal.Signals
) -> None:
    """SIGTERM (a service manager's stop, `kill`) ended the query by its default action, with
    no exit status of its own (a shell showed 143 but a parent saw a signal death), where every
    other long command that SIGTERM stops exits with 143 as Ctrl-C's 130."""
    url = _one_event_settled_at_once(runner, tmp_path, monkeypatch)
    live = subprocess.Popen(  # inherits the environment, PYTHONPATH included
        [sys.executable, "-m", "ordo.cli.main", "query", "t", "--live", "--journal", url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert live.stdout is not None
        assert "p#1" in live.stdout.readline()  # the query is live once it delivered the event
        live.send_signal(stop)
        _, err = live.communicate(timeout=30)
    finally:
        live.kill()
    assert (live.returncode, err) == (128 + stop, "")


def test_a_query_that_prints_nothing_says_why(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An hour's delay, so that the event is young however slowly the test runs (5 s was not)."""
    monkeypatch.setenv("ORDO_EVENTUAL_CONSISTENCY_DELAY_MS", "3600000")
    url = f"sqlite:///{tmp_path}/q.db"
    line = json.dumps({"persistence_id": "p", "payload": {}, "tags": ["t"]})
    assert _run(runner, "append", "--journal", url, stdin=line)[0] == 0

    code, out, err = _run(runner, "query", "t", "--journal", url)

    assert code == 0
    assert out == ""
    assert "no events of tag 't' are settled" in err
    assert "eventual-consistency delay (3600 s, ORDO_EVENTUAL_CONSISTENCY_DELAY_MS)" in err
    code, out, err = _run(runner, "query", "t", "--journal", url, "--offset", "2000-01-01T00:00Z")
    assert "no events of tag 't' after --offset 2000-01-01T00:00Z are settled: events" in err


def test_a_query_after_the_last_event_says_nothing_is_after_its_offset(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It used to say "a tag without events reads empty" of a tag with events."""
    url = _one_event_settled_at_once(runner, tmp_path, monkeypatch)
    last = json.loads(_run(runner, "query", "t", "--journal", url, "--json")[1])["offset"]

    code, out, err = _run(runner, "query", "t", "--journal", url, "--offset", last)

    assert (code, out) == (0, "")
    assert err.startswith(f"no events of tag 't' after --offset {last} are settled: events")
    assert "without events" not in err


@pytest.mark.parametrize(
    ("offset", "message"),
    [
        ("yesterday-ish", "--offset 'yesterday-ish' is neither a TimeUUID nor an ISO-8601 time"),
        ("garbage", "--offset 'garbage' is neither a TimeUUID nor an ISO-8601 time"),
        ("2026-01-01T00:00", "--offset '2026-01-01T00:00' has no zone; add one (e.g. +00:00)"),
        (
            "2f1e0c4e-9c1a-4b7e-8d3e-4f5a6b7c8d9e",
            "'2f1e0c4e-9c1a-4b7e-8d3e-4f5a6b7c8d9e' is not a version-1 (time-based) UUID",
        ),
        (  # it named `epoch_ns`, no option of the command's
            "1500-01-01T00:00:00+00:00",
            "datetime 1500-01-01T00:00:00+00:00 is outside the times a TimeUUID holds "
            "(1582-10-15T00:00:00+00:00 to 5236-03-31T21:21:00.684697+00:00)",
        ),
    ],
)
def test_query_refuses_bad_offsets(
    runner: CliRunner, tmp_path: Path, offset: str, message: str
) -> None:
    """A text without a dash was refused as "not a UUID", a naive time with a library's advice."""
    code, _, err = _run(runner, "query", "t", "--journal", f"{tmp_path}/q.db", "--offset", offset)
    assert (code, err) == (1, f"Error: OffsetFormatError: {message}\n")
    assert not (tmp_path / "q.db").exists()


def test_query_reads_from_an_iso_time_in_the_basic_format(
    runner: CliRunner, tmp_path: Path
) -> None:
    """An ISO-8601 time without dashes was read as a UUID and refused."""
    url = f"sqlite:///{tmp_path}/q.db"
    assert _run(runner, "init", "--journal", url)[0] == 0
    code, _, err = _run(runner, "query", "t", "--journal", url, "--offset", "20000101T000000Z")
    assert code == 0
    assert "after --offset 20000101T000000Z are settled" in err


def test_query_refuses_another_bucket_size_than_the_journal(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path}/q.db"
    line = json.dumps({"persistence_id": "p", "payload": {}, "tags": ["t"]})
    assert _run(runner, "append", "--journal", url, stdin=line)[0] == 0
    monkeypatch.setenv("ORDO_BUCKET_SIZE", "minute")

    code, out, err = _run(runner, "query", "t", "--journal", url)

    assert (code, out) == (1, "")
    assert err.startswith("Error: BucketSizeMismatchError: journal records bucket_size=h")
    assert err.endswith("; set ORDO_BUCKET_SIZE to hour\n")
