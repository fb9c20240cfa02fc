"""init, append, events, tags and info: writing a journal and reading it back."""

from __future__ import annotations

import json
import signal
import socket
import sqlite3
import subprocess
import sys
import uuid
from contextlib import closing
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli_support import journal_with_one_event as _journal_with_one_event
from cli_support import run as _run
from operations_support import execute
from ordo.cli.root import cli
from processing_support import wait_for
from sqlite_support import JOURNAL_ID_VERSION, LATEST, older_journal, stored_version


def test_python_dash_m_ordo_runs_the_command_line(tmp_path: Path) -> None:
    """`python -m ordo` said "'ordo' is a package and cannot be directly executed"."""

    def python_m_ordo(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "ordo", *args]
        return subprocess.run(command, input=stdin, capture_output=True, text=True, check=False)

    url = f"sqlite:///{tmp_path}/j.db"
    appended = python_m_ordo(
        "append", "--journal", url, stdin='{"persistence_id": "o", "payload": 1}'
    )
    assert (appended.returncode, appended.stdout) == (0, "appended 1 event to 1 persistence id\n")
    refused = python_m_ordo("events", "", "--journal", url)  # the one error boundary too
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == "Error: InvalidIdentifierError: persistence_id must not be empty\n"
    assert python_m_ordo("--help").stdout.startswith("Usage: ordo [OPTIONS]")


def test_init_is_idempotent(
    runner: CliRunner, journal_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ORDO_BUCKET_SIZE", raising=False)
    code, out, _ = _run(runner, "init", "--journal", journal_url, "--json")
    assert code == 0
    assert json.loads(out) == {
        "previous_version": 0,
        "version": LATEST,
        "previous_bucket_size": None,
        "bucket_size": None,
    }
    code, out, _ = _run(runner, "init", "--journal", journal_url, "--json")
    assert code == 0
    assert json.loads(out)["previous_version"] == LATEST


def test_init_records_the_bucket_size_of_the_environment(
    runner: CliRunner, journal_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ORDO_BUCKET_SIZE=minute ordo init recorded nothing: a write with the default got hour."""
    monkeypatch.setenv("ORDO_BUCKET_SIZE", "Minute")
    code, out, _ = _run(runner, "init", "--journal", journal_url)
    assert (code, out) == (0, f"schema at version {LATEST} (was 0); bucket size minute recorded\n")
    code, out, _ = _run(runner, "init", "--journal", journal_url)
    assert (code, out) == (0, f"schema already at version {LATEST}; nothing to do\n")

    monkeypatch.delenv("ORDO_BUCKET_SIZE")
    line = json.dumps({"persistence_id": "p", "payload": {}, "tags": ["t"]})
    code, _, err = _run(runner, "append", "--journal", journal_url, stdin=line)
    assert code == 1
    assert err.startswith("Error: BucketSizeMismatchError: journal records bucket_size=m")
    code, out, _ = _run(runner, "info", "--journal", journal_url, "--json")
    assert (json.loads(out)["bucket_size"], json.loads(out)["events"]) == ("minute", 0)


def test_init_refuses_another_bucket_size_than_the_recorded_one(
    runner: CliRunner, journal_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ORDO_BUCKET_SIZE", raising=False)
    line = json.dumps({"persistence_id": "p", "payload": {}, "tags": ["t"]})
    assert _run(runner, "append", "--journal", journal_url, stdin=line)[0] == 0
    monkeypatch.setenv("ORDO_BUCKET_SIZE", "day")

    code, out, err = _run(runner, "init", "--journal", journal_url, "--json")

    assert (code, out) == (1, "")
    assert err.startswith("Error: BucketSizeMismatchError: journal records bucket_size=h")
    assert err.count("\n") == 1
    monkeypatch.setenv("ORDO_BUCKET_SIZE", "hour")
    code, out, _ = _run(runner, "init", "--journal", journal_url, "--json")
    assert code == 0
    assert (json.loads(out)["previous_bucket_size"], json.loads(out)["bucket_size"]) == (
        "hour",
        "hour",
    )


def test_init_refuses_another_bucket_size_before_upgrading_an_older_journal(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refused init used to upgrade the schema first: a rejected input changed the file."""
    older = tmp_path / "older.db"
    older_journal(older)
    with closing(sqlite3.connect(older)) as conn, conn:
        conn.execute("INSERT INTO ordo_metadata (key, value) VALUES ('bucket_size', 'hour')")
    before = _schema_of(older)
    monkeypatch.setenv("ORDO_BUCKET_SIZE", "day")

    code, out, err = _run(runner, "init", "--journal", str(older))

    assert (code, out) == (1, "")
    assert err.startswith("Error: BucketSizeMismatchError: journal records bucket_size=h")
    assert (stored_version(older), _schema_of(older)) == (LATEST - 1, before)
    monkeypatch.setenv("ORDO_BUCKET_SIZE", "hour")
    assert _run(runner, "init", "--journal", str(older))[0] == 0
    assert stored_version(older) == LATEST


def _schema_of(path: Path) -> list[tuple[str, str]]:
    """The tables and indexes of an SQLite file (init may switch it to WAL even when refused)."""
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute("SELECT name, sql FROM sqlite_schema ORDER BY name").fetchall()


def test_init_without_a_bucket_size_leaves_it_to_the_first_write(
    runner: CliRunner, journal_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty journal is not fixed to the default: docs/cli.md says the first write records it."""
    monkeypatch.delenv("ORDO_BUCKET_SIZE", raising=False)
    assert _run(runner, "init", "--journal", journal_url)[0] == 0
    monkeypatch.setenv("ORDO_BUCKET_SIZE", "day")
    line = json.dumps({"persistence_id": "p", "payload": {}, "tags": ["t"]})
    assert _run(runner, "append", "--journal", journal_url, stdin=line)[0] == 0
    code, out, _ = _run(runner, "info", "--journal", journal_url, "--json")
    assert (code, json.loads(out)["bucket_size"]) == (0, "day")


def test_init_creates_the_folders_of_a_new_journal(runner: CliRunner, tmp_path: Path) -> None:
    """`ordo init` is for making journals, as `git init a/b` makes its folders."""
    code, _, err = _run(runner, "init", "--journal", f"{tmp_path}/new/folder/j.db")
    assert code == 0, err
    assert (tmp_path / "new" / "folder" / "j.db").is_file()


def test_append_names_its_argument_file_as_its_help_and_the_docs_do(
    runner: CliRunner, tmp_path: Path
) -> None:
    """The usage line and the error said SOURCE, the help text and docs/cli.md FILE."""
    code, out, _ = _run(runner, "append", "--help")
    assert (code, out.splitlines()[0]) == (0, "Usage: ordo append [OPTIONS] [FILE]")
    missing = tmp_path / "events.jsonl"
    code, _, err = _run(runner, "append", str(missing), "--journal", f"{tmp_path}/j.db")
    assert code == 2
    assert err.startswith(f"Error: Invalid value for '[FILE]': '{missing}': No such file")
    assert not (tmp_path / "j.db").exists()


def test_append_then_events_and_info(runner: CliRunner, journal_url: str) -> None:
    lines = "\n".join(
        json.dumps(line)
        for line in (
            {"persistence_id": "order-1", "payload": {"n": 1}, "tags": ["order"]},
            {"persistence_id": "order-1", "payload": {"n": 2}, "tags": ["order", "pay"]},
            {
                "persistence_id": "order-2",
                "payload": {"n": 3},
                "manifest": "Placed",
                "metadata": {"by": "cli"},
                "expected_sequence_nr": 0,
            },
        )
    )
    code, out, _ = _run(runner, "append", "--journal", journal_url, "--json", stdin=lines)
    assert code == 0, out
    assert json.loads(out)["events"] == 3
    code, out, _ = _run(runner, "events", "order-1", "--journal", journal_url, "--json")
    assert code == 0
    replayed = json.loads(out)
    assert [e["payload"] for e in replayed] == [{"n": 1}, {"n": 2}]
    assert replayed[1]["tags"] == {"order": 2, "pay": 1}
    code, out, _ = _run(runner, "info", "--journal", journal_url, "--json")
    assert code == 0
    info = json.loads(out)
    assert (info["events"], info["persistence_ids"]) == (3, 2)
    assert info["tags"] == {"order": 2, "pay": 1}
    code, out, _ = _run(runner, "tags", "--journal", journal_url, "--json")
    assert [t["tag"] for t in json.loads(out)] == ["order", "pay"]
    code, out, _ = _run(runner, "tags", "--journal", journal_url)
    order, pay = out.splitlines()
    assert order.startswith("order\t2 events\t1 persistence id\t")  # 1 or 2 hour buckets
    assert pay == "pay\t1 event\t1 persistence id\t1 bucket"


def test_tags_json_gives_the_buckets_in_iso_8601_utc(
    runner: CliRunner, journal_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It gave Akka's `20260131T10:00`, and `verify --json` epoch millis, for the same thing."""
    monkeypatch.setenv("ORDO_BUCKET_SIZE", "hour")
    event = json.dumps({"persistence_id": "order-1", "payload": 1, "tags": ["order"]})
    assert _run(runner, "append", "--journal", journal_url, stdin=event)[0] == 0
    code, out, _ = _run(runner, "events", "order-1", "--journal", journal_url, "--json")
    (written,) = json.loads(out)
    hour = datetime.fromisoformat(written["timestamp"]).replace(minute=0, second=0, microsecond=0)

    code, out, _ = _run(runner, "tags", "--journal", journal_url, "--json")

    assert code == 0
    (tag,) = json.loads(out)
    assert (tag["first_bucket"], tag["last_bucket"]) == (hour.isoformat(), hour.isoformat())
    assert tag["first_bucket"].endswith("+00:00")


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ('{"persistence_id": "", "payload": 1}', "persistence_id must not be empty"),
        ('{"persistence_id": "p", "payload": 1, "tags": [""]}', "tag must not be empty"),
        ('{"persistence_id": "p"}', "missing key payload"),
        (
            '{"persistence_id": "p", "payload": 1, "colour": 1}',
            "the event has unknown key 'colour' (valid keys: persistence_id, payload, ",
        ),
        ("not json", "not valid JSON"),
        (
            '{"persistence_id": "p", "payload": 1, "expected_sequence_nr": -1}',
            "expected_sequence_nr must be an integer >= 0, got -1",
        ),
        ('{"persistence_id": "q", "payload": NaN}', "line 2: not valid JSON: NaN is not a JSON"),
        ('{"persistence_id": "q", "payload": [1e999]}', "line 2: number 1e999 is out of the range"),
        ('{"persistence_id": "q", "payload": "\\ud800"}', "line 2: payload is neither bytes"),
        ('{"persistence_id": "q", "payload": 1, "manifest": "\\ud800"}', "line 2: manifest"),
        ('{"persistence_id": "q", "payload": 1, "manifest": "a\\u0000b"}', "line 2: manifest"),
        ('{"payload": 1}', "line 2: missing key persistence_id"),  # was "got NoneType"
        (  # deeper than Python's json module reads: a RecursionError's traceback
            '{"persistence_id": "q", "payload": ' + "[" * 100_000 + "]" * 100_000 + "}",
            "line 2: not valid JSON: nested deeper than the ",
        ),
        (  # more digits than Python converts: a ValueError's traceback, then Python's advice
            '{"persistence_id": "q", "payload": 1' + "0" * 5_000 + "}",
            "line 2: not valid JSON: integer too long (5,001 digits, at most 4,300)\n",
        ),
        (  # the json module kept the last: the line was appended with payload 2, and no word
            '{"persistence_id": "q", "payload": 1, "payload": 2}',
            "line 2: not valid JSON: duplicate key 'payload'\n",
        ),
        ('{"persistence_id": "q", "payload": {"a": 1, "a": 1}}', "line 2: not valid JSON: dup"),
    ],
)
def test_a_bad_line_is_one_error_line_and_nothing_is_written(
    runner: CliRunner, tmp_path: Path, line: str, needle: str
) -> None:
    url = f"sqlite:///{tmp_path}/j.db"
    good = '{"persistence_id": "p", "payload": 0}'
    code, _, err = _run(runner, "append", "--journal", url, stdin=f"{good}\n{line}\n")
    assert code == 1
    assert needle in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "j.db").exists()  # validated before the journal is even opened


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (
            '{"persistence_id": "q", "payload": {"x": 0.10000000000000000001}}',
            "number 0.10000000000000000001 is rounded to 0.1 as a double",
        ),
        (
            '{"persistence_id": "q", "payload": 1, "metadata": {"y": 1e-400}}',
            "number 1e-400 is rounded to 0.0 as a double",
        ),
    ],
)
def test_a_number_a_double_would_round_is_refused_as_cdc_ingest_refuses_it(
    runner: CliRunner, tmp_path: Path, line: str, problem: str
) -> None:
    """It was appended as 0.1 (0.0), a number the line does not say, without a word.

    Another spelling of a double's number (`1E+2`, `1.50`) is appended as that double.
    """
    url = f"sqlite:///{tmp_path}/j.db"
    exact = '{"persistence_id": "q", "payload": {"x": 1E+2}, "metadata": {"y": 1.50}}'
    assert _run(runner, "append", "--journal", url, stdin=exact)[0] == 0

    code, _, err = _run(runner, "append", "--journal", url, stdin=line)

    _, out, _ = _run(runner, "events", "q", "--journal", url, "--json")
    assert [(e["payload"], e["metadata"]) for e in json.loads(out)] == [({"x": 100.0}, {"y": 1.5})]
    assert (code, err) == (1, f"Error: InvalidInputError: line 1: {problem}\n")


def test_a_conflict_stops_the_appends_at_its_line_and_says_what_was_written(
    runner: CliRunner, tmp_path: Path
) -> None:
    url = _journal_with_one_event(runner, tmp_path)
    lines = [
        '{"persistence_id": "a", "payload": 1}',
        '{"persistence_id": "a", "payload": 2}',
        '{"persistence_id": "o", "payload": 3, "expected_sequence_nr": 0}',
        '{"persistence_id": "b", "payload": 4}',
    ]
    code, _, err = _run(runner, "append", "--journal", url, stdin="\n".join(lines))
    assert code == 1
    assert err.strip() == (
        "Error: AppendStoppedError: line 3: ConcurrencyConflictError: persistence_id='o': "
        "expected sequence_nr 0 but the journal is at 1; the appends of lines 1-2 were written "
        "(2 events)"
    )
    code, out, _ = _run(runner, "info", "--journal", url, "--json")
    assert (json.loads(out)["events"], json.loads(out)["persistence_ids"]) == (3, 2)

    code, _, err = _run(runner, "append", "--journal", url, stdin="\n".join(lines[1:]))
    assert code == 1
    assert err.strip().endswith("; the append of line 1 was written (1 event)")


def test_binary_input_is_one_error_line_and_nothing_is_written(
    runner: CliRunner, tmp_path: Path
) -> None:
    result = runner.invoke(
        cli, ["append", "--journal", f"{tmp_path}/j.db"], input=b'{"persistence_id": "p"}\xff\n'
    )
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "Error: InvalidInputError: stdin is not UTF-8 text (invalid start byte)"
    )
    assert not (tmp_path / "j.db").exists()


def test_an_input_file_that_is_not_utf8_is_named(runner: CliRunner, tmp_path: Path) -> None:
    """The error said "the input", as if it were stdin: `ordo cdc ingest` names its file."""
    latin1 = tmp_path / "events.jsonl"
    latin1.write_bytes('{"persistence_id": "café", "payload": 0}\n'.encode("latin-1"))
    code, _, err = _run(runner, "append", "--journal", f"{tmp_path}/j.db", str(latin1))
    assert (code, err) == (
        1,
        f"Error: InvalidInputError: {latin1} is not UTF-8 text (invalid continuation byte)\n",
    )
    assert not (tmp_path / "j.db").exists()


@pytest.mark.parametrize("given", ["stdin", "file"])
def test_a_byte_order_mark_at_the_start_of_the_input_is_skipped(
    runner: CliRunner, tmp_path: Path, given: str
) -> None:
    """Editors on Windows write one: line 1 was "not valid JSON: Expecting value"."""
    lines = '{"persistence_id": "p", "payload": 1}\n{"persistence_id": "p", "payload": 2}\n'
    data = b"\xef\xbb\xbf" + lines.encode()
    events = tmp_path / "events.jsonl"
    events.write_bytes(data)
    args = ["append", "--journal", f"{tmp_path}/j.db"]
    result = runner.invoke(
        cli,
        args if given == "stdin" else [*args, str(events)],
        input=data if given == "stdin" else None,
    )
    assert (result.exit_code, result.stdout) == (0, "appended 2 events to 1 persistence id\n")


def test_a_conflicting_expected_sequence_nr_is_reported(runner: CliRunner, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/j.db"
    line = '{"persistence_id": "p", "payload": 0, "expected_sequence_nr": 0}'
    assert _run(runner, "append", "--journal", url, stdin=line)[:2] == (
        0,
        "appended 1 event to 1 persistence id\n",
    )
    code, _, err = _run(runner, "append", "--journal", url, stdin=line)
    assert code == 1
    assert "ConcurrencyConflictError" in err
    assert "expected sequence_nr 0 but the journal is at 1" in err


def test_info_text_shows_what_its_json_shows(runner: CliRunner, tmp_path: Path) -> None:
    """A bucket size not recorded yet read "None", then "null", and the tags were a Python dict."""
    url = f"sqlite:///{tmp_path}/i.db"
    assert _run(runner, "init", "--journal", url)[0] == 0
    code, out, _ = _run(runner, "info", "--journal", url)
    assert code == 0
    journal_id = json.loads(_run(runner, "info", "--journal", url, "--json")[1])["journal_id"]
    assert out.splitlines() == [
        "backend          sqlite",
        f"schema_version   {LATEST}",
        "bucket_size      not recorded yet (set by the first write, or by `ordo init` with "
        "ORDO_BUCKET_SIZE)",
        f"journal_id       {journal_id}",
        "events           0",
        "persistence_ids  0",
        "tags             {}",
    ]
    line = json.dumps({"persistence_id": "p", "payload": 1, "tags": ["t", "ü"]})
    assert _run(runner, "append", "--journal", url, stdin=line)[0] == 0
    out = _run(runner, "info", "--journal", url)[1]
    assert out.splitlines()[2] == "bucket_size      hour"
    assert out.splitlines()[-1] == 'tags             {"t": 1, "ü": 1}'


def test_a_journal_keeps_the_random_id_it_got_when_created_or_upgraded(
    runner: CliRunner, tmp_path: Path
) -> None:
    """What tells Spark's source that a checkpoint is of another journal: offsets named none."""

    def journal_id(url: str) -> str:
        code, out, _ = _run(runner, "info", "--journal", url, "--json")
        assert code == 0
        found = json.loads(out)["journal_id"]
        assert uuid.UUID(found).version == 4
        return str(found)

    url = f"sqlite:///{tmp_path}/j.db"
    assert _run(runner, "init", "--journal", url)[0] == 0
    created = journal_id(url)
    assert _run(runner, "init", "--journal", url)[0] == 0
    line = json.dumps({"persistence_id": "p", "payload": 1, "tags": ["t"]})
    assert _run(runner, "append", "--journal", url, stdin=line)[0] == 0
    assert journal_id(url) == created
    written = f"sqlite:///{tmp_path}/w.db"  # made by a writer's first open, not by init
    assert _run(runner, "append", "--journal", written, stdin=line)[0] == 0
    older = tmp_path / "older.db"
    older_journal(older, version=JOURNAL_ID_VERSION - 1)  # an ordo before the id: none
    assert _run(runner, "init", "--journal", str(older))[0] == 0
    ids = {created, journal_id(written), journal_id(str(older))}
    assert len(ids) == 3


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_append_says_so_in_one_line_and_releases_its_writer_lease(
    tmp_path: Path, stop: signal.Signals
) -> None:
    """SIGTERM (a service manager's stop) ended the append at once: its writer lease stayed, so a
    `reconcile rebuild` of an appended id right after was refused as of a live writer, for the
    lease timeout (30 s). Ctrl-C printed click's "Aborted!" and exited 1."""
    url = f"sqlite:///{tmp_path}/j.db"
    lines = tmp_path / "events.jsonl"
    lines.write_text(
        "".join(
            json.dumps({"persistence_id": f"p-{n % 100}", "payload": n, "tags": ["t"]}) + "\n"
            for n in range(50_000)
        ),
        encoding="utf-8",
    )
    assert _run(CliRunner(), "init", "--journal", url)[0] == 0
    command = [sys.executable, "-m", "ordo", "append", "--journal", url, str(lines)]
    append = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(
        lambda: execute(url, "SELECT count(*) FROM messages") != [(0,)],
        timeout=60,
        what="the append to write",
    )
    append.send_signal(stop)
    out, err = append.communicate(timeout=60)

    assert (append.returncode, out, err) == (
        128 + stop,
        "",
        "append interrupted: the lines appended so far stay, each persistence id's run whole\n",
    )
    assert execute(url, "SELECT count(*) FROM writer_leases") == [(0,)]
    code, _, refused = _run(CliRunner(), "reconcile", "rebuild", "p-0", "--journal", url)
    assert code == 0, refused


_SILENT_CONNECT_TIMEOUT_S = 30
"""The connect_timeout of the URL of a server that never answers: how long a held stop waits."""


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_an_append_stopped_while_its_journal_connects_ends_at_once(
    tmp_path: Path, stop: signal.Signals
) -> None:
    """The journal was opened within the stop flag: a Ctrl-C or SIGTERM while the connect waited
    for a server that does not answer (a dropped route, a frozen host) was held until the
    connect timed out (10 s by default), and the command then failed as an outage, status 1."""
    lines = tmp_path / "events.jsonl"
    lines.write_text('{"persistence_id": "p", "payload": 1}\n', encoding="utf-8")
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never answers
        silent.settimeout(60)
        port = silent.getsockname()[1]
        url = f"postgresql://u@127.0.0.1:{port}/db?connect_timeout={_SILENT_CONNECT_TIMEOUT_S}"
        command = [sys.executable, "-m", "ordo", "append", "--journal", url, str(lines)]
        with subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        ) as append:
            try:
                connecting, _ = silent.accept()
                with connecting:
                    append.send_signal(stop)
                    # held, the stop would wait out the connect_timeout: half of it is plenty
                    out, err = append.communicate(timeout=_SILENT_CONNECT_TIMEOUT_S / 2)
            finally:
                append.kill()  # nothing to do unless it is still connecting

    assert (append.returncode, out, err) == (
        128 + stop,
        "",
        "append interrupted: the lines appended so far stay, each persistence id's run whole\n",
    )
