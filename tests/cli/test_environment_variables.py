"""ORDO_* variables on the command line: each means one setting, and a bad value of one is a
one-line error naming it, given before the command changes anything.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli_support import run
from ordo.cli.environment import (
    OPTION_VARIABLES,
    option_variables,
    variables_read,
    warn_of_unread_variables,
)
from ordo.cli.root import cli
from sqlite_support import fingerprint, older_journal, stored_version


def _source(tmp_path: Path) -> Path:
    """An SQLite capture source with one table of one row."""
    source = tmp_path / "shop.db"
    with sqlite3.connect(source) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, qty INTEGER)")
        conn.execute("INSERT INTO items VALUES (1, 1)")
    return source


def _capture(runner: CliRunner, tmp_path: Path, source: Path) -> tuple[int, str, str]:
    """`ordo cdc capture` of `source`'s table into a new journal and change log."""
    return run(
        runner,
        *("cdc", "capture", str(source), "--table", "items"),
        *("--journal", str(tmp_path / "new.db"), "--change-log", str(tmp_path / "log")),
    )


def _refused_as_usage(code: int, out: str, err: str, *, option: str, variable: str) -> None:
    """One usage-error line (exit 2) naming the option and the variable it came from."""
    assert (code, out) == (2, "")
    assert err.startswith(f"Error: Invalid value for '{option}' (env var: '{variable}'): ")
    assert err.count("\n") == 1


def _untouched(tmp_path: Path, source: Path, before: tuple[str, str]) -> None:
    """No journal, no change log, and the source without change triggers."""
    assert not (tmp_path / "new.db").exists()
    assert not (tmp_path / "log").exists()
    assert fingerprint(source) == before


def test_the_capture_reads_its_own_flush_interval_not_the_tag_writers(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ORDO_FLUSH_INTERVAL_MS is the tag writer's (0 writes each event at once); a capture's
    flush interval must be above 0, and is ORDO_CDC_FLUSH_INTERVAL_MS, which was read nowhere."""
    source = _source(tmp_path)
    before = fingerprint(source)
    monkeypatch.setenv("ORDO_FLUSH_INTERVAL_MS", "0")
    monkeypatch.setenv("ORDO_CDC_FLUSH_INTERVAL_MS", "0")
    code, out, err = _capture(runner, tmp_path, source)
    _refused_as_usage(
        code, out, err, option="--flush-interval-ms", variable="ORDO_CDC_FLUSH_INTERVAL_MS"
    )
    assert "0 is not in the range 1<=x<=3153600000000" in err
    _untouched(tmp_path, source, before)
    monkeypatch.delenv("ORDO_CDC_FLUSH_INTERVAL_MS")
    assert _capture(runner, tmp_path, source)[:2] == (
        0,
        "published no changes (skipped 0 already in the log)\n",
    )


@pytest.mark.parametrize(
    ("variable", "option"),
    [
        ("ORDO_CDC_FLUSH_INTERVAL_MS", "--flush-interval-ms"),
        ("ORDO_MAX_CHANGES", "--max-changes"),
        ("ORDO_RECONNECT_TIMEOUT_MS", "--reconnect-timeout-ms"),
    ],
)
@pytest.mark.parametrize("value", ["", "abc", "-1", "1.5", "9007199254740992"])
def test_a_bad_capture_variable_is_refused_before_the_capture_changes_anything(
    runner: CliRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    option: str,
    value: str,
) -> None:
    """An empty one was taken for unset (the default, without a word), and the capture ran;
    ORDO_CDC_FLUSH_INTERVAL_MS and ORDO_MAX_CHANGES were not read at all."""
    source = _source(tmp_path)
    before = fingerprint(source)
    monkeypatch.setenv(variable, value)
    code, out, err = _capture(runner, tmp_path, source)
    _refused_as_usage(code, out, err, option=option, variable=variable)
    if not value:
        assert err.split("): ", 1)[1].startswith("the variable is set but empty")
    _untouched(tmp_path, source, before)


def test_an_empty_change_log_variable_is_not_the_default_folder(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ORDO_CDC_CHANGE_LOG=$UNSET_DIR` captured into .ordo/changelog of the working directory."""
    source = _source(tmp_path)
    before = fingerprint(source)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ORDO_CDC_CHANGE_LOG", "")
    code, out, err = run(
        runner, "cdc", "capture", str(source), "--table", "items", "--journal", "new.db"
    )
    _refused_as_usage(code, out, err, option="--change-log", variable="ORDO_CDC_CHANGE_LOG")
    _untouched(tmp_path, source, before)
    assert not (tmp_path / ".ordo").exists()


def test_an_empty_log_level_variable_is_refused_before_any_command(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORDO_LOG_LEVEL", "")
    code, out, err = run(runner, "init", "--journal", str(tmp_path / "new.db"))
    _refused_as_usage(code, out, err, option="--log-level", variable="ORDO_LOG_LEVEL")
    assert not (tmp_path / "new.db").exists()


def test_an_empty_lease_timeout_variable_is_a_usage_error_as_a_bad_one_is(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It was the settings' ConfigurationError (exit 1), where `abc` was a usage error (exit 2)."""
    journal = tmp_path / "j.db"
    assert run(runner, "init", "--journal", str(journal))[0] == 0
    before = fingerprint(journal)
    monkeypatch.setenv("ORDO_WRITER_LEASE_TIMEOUT_MS", "")
    code, out, err = run(runner, "reconcile", "delete", "p", "--journal", str(journal))
    _refused_as_usage(
        code,
        out,
        err,
        option="--writer-lease-timeout-ms",
        variable="ORDO_WRITER_LEASE_TIMEOUT_MS",
    )
    assert fingerprint(journal) == before


@pytest.mark.parametrize(
    "command",
    [
        ["processors", "split", "p", "0"],
        ["processors", "merge", "p", "0"],
        ["processors", "release", "p", "0"],
        ["processors", "reset", "p"],
    ],
)
@pytest.mark.parametrize("value", ["0", "", "abc"])
def test_a_bad_claim_timeout_leaves_an_older_journal_as_it_was(
    runner: CliRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    command: list[str],
    value: str,
) -> None:
    """The variable was read once the journal was open: its schema was upgraded first."""
    journal = tmp_path / "older.db"
    older_journal(journal)
    before = fingerprint(journal), stored_version(journal)
    monkeypatch.setenv("ORDO_CLAIM_TIMEOUT_MS", value)
    code, out, err = run(runner, *command, "--journal", str(journal))
    assert (code, out) == (1, "")
    assert err.startswith("Error: ConfigurationError: ORDO_CLAIM_TIMEOUT_MS: ")
    assert err.count("\n") == 1
    assert (fingerprint(journal), stored_version(journal)) == before


def test_a_misspelt_variable_is_named_in_a_warning_with_the_one_meant(tmp_path: Path) -> None:
    """ORDO_FLUSH_INTERVAL (for ORDO_FLUSH_INTERVAL_MS) was read by nobody, without a word."""
    done = subprocess.run(
        [sys.executable, "-m", "ordo.cli.main", "init", "--journal", str(tmp_path / "j.db")],
        capture_output=True,
        text=True,
        env={**os.environ, "ORDO_FLUSH_INTERVAL": "0"},
        check=False,
    )
    assert done.returncode == 0
    assert done.stderr == (
        "WARNING ordo.cli.environment: ORDO_FLUSH_INTERVAL is not a variable ordo reads;"
        " it is ignored (did you mean ORDO_FLUSH_INTERVAL_MS?)\n"
    )


def test_only_variables_nothing_reads_are_warned_of(caplog: pytest.LogCaptureFixture) -> None:
    """Every variable ordo reads, the test suite's and other programs' pass without a word; an
    ORDO_* name like none of them is named without a guess."""
    caplog.set_level(logging.WARNING, logger="ordo")
    read = {name: "1" for name in variables_read(cli)}
    others = {"ORDO_TEST_POSTGRES_DSN": "postgresql://", "PATH": "/bin", "ORDOX": "1"}
    warn_of_unread_variables(cli, {**read, **others, "ORDO_COLOUR": "red"})
    assert [r.getMessage() for r in caplog.records] == [
        "ORDO_COLOUR is not a variable ordo reads; it is ignored"
    ]


def test_the_variables_a_command_start_looks_at_are_those_of_the_options() -> None:
    """Each start reads OPTION_VARIABLES rather than walk every command's options, which imports
    every command's module: a variable missing there made each start walk them, one left there
    after its option went was never warned of."""
    assert option_variables(cli) == OPTION_VARIABLES
