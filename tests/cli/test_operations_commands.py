"""`ordo reconcile` and `ordo cleanup`: thin commands, one-line refusals, dry runs, JSON."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli_support import fill_pipe, spark_command
from operations_support import WRITE, execute, tag_view_rows, write_with_writers
from ordo import NewEvent, open_journal
from ordo.cli.root import cli
from ordo.clock import ManualClock
from processing_support import wait_for


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_reconcile_commands_round_trip(journal_url: str) -> None:
    write_with_writers(journal_url, writers=2, pids=2, appends=3)
    before = tag_view_rows(journal_url)
    j = ("--journal", journal_url)

    code, out, _ = _run("reconcile", "tags", *j, "--json")
    assert code == 0
    assert {t["tag"] for t in json.loads(out)} == {"a", "b"}
    code, out, _ = _run("reconcile", "tags", "w0-p1", *j)
    assert (code, out) == (0, "a\nb\n")

    code, out, _ = _run("reconcile", "delete", "w0-p1", *j, "--dry-run", "--json")
    assert code == 0
    assert json.loads(out)["dry_run"] is True
    assert tag_view_rows(journal_url) == before
    code, out, _ = _run("reconcile", "delete", "w0-p1", "--tag", "a", *j)
    assert code == 0
    assert out.startswith("delete tag views: deleted ")  # what was done, not "delete"
    code, out, _ = _run("reconcile", "rebuild", "w0-p1", *j)
    assert code == 0
    assert "; wrote " in out
    assert tag_view_rows(journal_url) == before

    code, out, _ = _run("reconcile", "truncate", *j)
    assert code == 0
    assert f"deleted {len(before)} tag_views rows" in out
    code, out, _ = _run("reconcile", "rebuild", "--all", "--local", *j, "--json")
    assert code == 0
    assert json.loads(out)["written_rows"] == len(before)
    assert tag_view_rows(journal_url) == before

    code, out, _ = _run("reconcile", "rebuild", "nobody", *j)
    assert code == 0
    assert "nothing to do" in out
    code, _, err = _run("reconcile", "rebuild", "w0-p1", "--all", *j)
    assert code == 2
    assert "not both" in err


def test_reconcile_tags_json_has_what_its_text_shows(tmp_path: Path) -> None:
    """The text gives each tag's persistence ids; the JSON left them out."""
    url = f"sqlite:///{tmp_path}/j.db"
    lines = "".join(
        json.dumps({"persistence_id": pid, "payload": {}, "tags": ["t"]}) + "\n"
        for pid in ("p1", "p1", "p2")
    )
    assert CliRunner().invoke(cli, ["append", "--journal", url], input=lines).exit_code == 0
    code, out, _ = _run("reconcile", "tags", "--journal", url)
    assert (code, out) == (0, "t  3 events  2 persistence ids\n")
    code, out, _ = _run("reconcile", "tags", "--journal", url, "--json")
    assert (code, json.loads(out)) == (0, [{"tag": "t", "events": 3, "persistence_ids": 2}])


def test_counts_of_one_are_singular_in_the_rebuilds_note_and_the_tags_list(
    tmp_path: Path,
) -> None:
    """A rebuild of a journal of one persistence id noted "1 persistence ids"."""
    url = f"sqlite:///{tmp_path}/j.db"
    line = json.dumps({"persistence_id": "p1", "payload": {}, "tags": ["t"]}) + "\n"
    assert CliRunner().invoke(cli, ["append", "--journal", url], input=line).exit_code == 0

    code, out, _ = _run("reconcile", "tags", "--journal", url)
    assert (code, out) == (0, "t  1 event  1 persistence id\n")
    code, out, err = _run("reconcile", "rebuild", "--all", "--local", "--journal", url)
    assert code == 0, err
    assert out.rstrip().endswith("(1 persistence id)")
    assert err.splitlines()[-1] == "1 persistence id, 1 row"


@pytest.mark.parametrize("args", [[], ["p", "--all"]])
def test_rebuild_without_a_persistence_id_or_all_is_a_usage_error(
    tmp_path: Path, args: list[str]
) -> None:
    """A missing argument exits 2, as docs/cli.md says of usage errors; it exited 1."""
    url = f"sqlite:///{tmp_path}/j.db"
    assert _run("init", "--journal", url)[0] == 0
    code, out, err = _run("reconcile", "rebuild", *args, "--journal", url)
    assert (code, out, err) == (
        2,
        "",
        "Error: give a PERSISTENCE_ID or --all (not both); see 'ordo reconcile rebuild --help'\n",
    )


def test_refusals_are_one_line_and_change_nothing(journal_url: str) -> None:
    with open_journal(journal_url, settings=WRITE) as journal:
        journal.append("busy", [NewEvent.of(1, tags=["a"])])
        journal.flush()
        before = tag_view_rows(journal_url)
        for args in (
            ("reconcile", "delete", "busy"),
            ("reconcile", "truncate"),
            ("cleanup", "delete", "busy"),
        ):
            code, _, err = _run(*args, "--journal", journal_url)
            assert code == 1, args
            assert err.startswith("Error: ActiveWriterError: ")
            assert err.count("\n") == 1
            assert journal.writer_uuid in err
        assert tag_view_rows(journal_url) == before
        code, out, _ = _run("reconcile", "delete", "busy", "--force", "--journal", journal_url)
        assert code == 0
        leases = f"leases on persistence_id 'busy' (writer {journal.writer_uuid})"
        assert f"; forced past live writers' {leases}" in out


def test_a_forced_result_names_the_writers_it_went_past(journal_url: str) -> None:
    """docs/cli.md: "the result names the writers it went past"; it named the ids, and `*`.

    A truncate changes every persistence id: its text said "forced past live writers of *".
    """
    with open_journal(journal_url, settings=WRITE) as journal:
        journal.append("busy", [NewEvent.of(1, tags=["a"])])
        journal.flush()
        code, out, _ = _run("reconcile", "truncate", "--force", "--journal", journal_url)
    assert code == 0
    assert out.endswith(f"; forced past live writers' leases (writer {journal.writer_uuid})\n")
    assert "*" not in out


@pytest.mark.parametrize("ttl", ["0", "-5"])
def test_cleanup_expire_refuses_a_time_to_live_out_of_range_as_usage(
    journal_url: str, ttl: str
) -> None:
    """--help showed no lower bound, and the ConfigurationError (exit 1) did not name the option."""
    write_with_writers(journal_url, writers=1, pids=1, appends=1)
    before = tag_view_rows(journal_url)
    code, _, err = _run("cleanup", "expire", "--time-to-live-ms", ttl, "--journal", journal_url)
    assert code == 2
    assert err.startswith(
        f"Error: Invalid value for '--time-to-live-ms': {ttl} is not in the range 1<=x<="
    )
    assert tag_view_rows(journal_url) == before


def test_cleanup_expire_and_before(journal_url: str) -> None:
    write_with_writers(journal_url, writers=1, pids=2, appends=2)
    j = ("--journal", journal_url)
    code, _, err = _run("cleanup", "expire", *j)
    assert code == 1
    assert "time_to_live is not set" in err
    code, out, _ = _run("cleanup", "expire", "--time-to-live-ms", "3600000", *j)
    assert code == 0
    assert out.startswith("nothing to do")
    code, _, err = _run("cleanup", "before", "2026-01-01T00:00:00", *j)
    assert code == 1
    assert err.strip() == (
        "Error: InvalidInputError: TIME '2026-01-01T00:00:00' has no zone; add one (e.g. +00:00)"
    )
    code, _, err = _run("cleanup", "before", "yesterday", *j)
    assert code == 1
    assert err.strip() == (  # a bad argument, not a bad setting (it was a ConfigurationError)
        "Error: InvalidInputError: TIME 'yesterday' is not an ISO-8601 time "
        "(e.g. 2026-01-31T00:00:00+00:00)"
    )
    code, _, err = _run("cleanup", "before", "2999-01-01T00:00:00+00:00", "--force", *j)
    assert code == 1
    assert err.strip() == (
        "Error: InvalidInputError: the cutoff 2999-01-01T00:00:00+00:00 is in the future: every "
        "row is older than it; to delete them all, give the current time"
    )
    now = datetime.now(UTC).isoformat()
    code, out, _ = _run("cleanup", "before", now, "--dry-run", *j)
    assert code == 0
    assert out.startswith("would delete")
    rows = len(tag_view_rows(journal_url))
    code, out, _ = _run("cleanup", "before", now, "--json", *j)
    assert code == 0
    assert json.loads(out)["deleted"] == rows > 0
    assert tag_view_rows(journal_url) == set()


@pytest.mark.parametrize(
    ("time", "bound"),
    [
        ("9999-12-31T23:00:00-05:00", "after 9999-12-31T23:59:59.999999+00:00, the latest"),
        ("0001-01-01T01:00:00+05:00", "before 0001-01-01T00:00:00+00:00, the earliest"),
    ],
)
def test_a_time_beyond_the_years_of_utc_is_refused_naming_it(
    journal_url: str, time: str, bound: str
) -> None:
    """9999-12-31T23:00-05:00 is in year 10000 in UTC: the error spoke of an `epoch_ms` the user
    never gave (`at most 253402300799999`); year 1 at +05:00 is in year 0 and was taken."""
    write_with_writers(journal_url, writers=1, pids=1, appends=1)
    before = tag_view_rows(journal_url)

    code, out, err = _run("cleanup", "before", time, "--journal", journal_url)

    assert (code, out) == (1, "")
    assert err.strip() == (
        f"Error: InvalidInputError: TIME {time!r} is {bound} time ordo reads (in UTC)"
    )
    assert tag_view_rows(journal_url) == before


def test_cleanup_json_gives_its_cutoff_in_iso_8601_utc(journal_url: str) -> None:
    """It gave `cutoff_ms` (epoch millis); the other JSON outputs write instants in ISO-8601."""
    write_with_writers(journal_url, writers=1, pids=1, appends=1)
    before = "2020-01-01T01:00:00.5+01:00"

    code, out, _ = _run("cleanup", "before", before, "--json", "--journal", journal_url)

    assert code == 0
    document = json.loads(out)
    assert (document["cutoff"], document["deleted"]) == ("2020-01-01T00:00:00.500000+00:00", 0)
    assert "cutoff_ms" not in document


def test_a_cutoff_before_1970_is_floored_to_its_millisecond(journal_url: str) -> None:
    """TIME 1969-12-31T23:59:59.9995 was cut off at 1970-01-01T00:00 (truncated toward zero):
    the row of an event at 23:59:59.9996, after TIME, was deleted."""
    with open_journal(journal_url, clock=ManualClock(-400_000)) as journal:
        journal.append("p", [NewEvent.of(1, tags=["t"])])
    before = tag_view_rows(journal_url)
    time = "1969-12-31T23:59:59.9995+00:00"

    code, out, _ = _run("cleanup", "before", time, "--json", "--journal", journal_url)

    assert code == 0
    document = json.loads(out)
    assert (document["cutoff"], document["deleted"]) == ("1969-12-31T23:59:59.999000+00:00", 0)
    assert tag_view_rows(journal_url) == before


def test_a_cutoff_before_the_first_timeuuid_deletes_nothing(journal_url: str) -> None:
    """No row is older than 1582-10-15: it was an OffsetFormatError about `epoch_ns`. (`expire`
    reached it too, with a time to live of 2**53 - 1 ms: now at most 100 years, a usage error.)"""
    write_with_writers(journal_url, writers=1, pids=1, appends=1)
    before = tag_view_rows(journal_url)

    code, out, err = _run(
        "cleanup", "before", "1500-01-01T00:00:00+00:00", "--json", "--journal", journal_url
    )

    assert (code, err) == (0, "")
    document = json.loads(out)
    assert (document["cutoff"], document["deleted"]) == ("1582-10-15T00:00:00+00:00", 0)
    assert tag_view_rows(journal_url) == before


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["reconcile", "delete", ""], "InvalidIdentifierError: persistence_id must not be empty"),
        (["reconcile", "tags", ""], "InvalidIdentifierError: persistence_id must not be empty"),
        (["reconcile", "rebuild", ""], "InvalidIdentifierError: persistence_id must not be empty"),
        (
            ["cleanup", "delete", "p", ""],
            "InvalidIdentifierError: persistence_id must not be empty",
        ),
        (
            ["reconcile", "delete", "p", "--tag", ""],
            "InvalidIdentifierError: tag must not be empty",
        ),
        (  # it listed every processor, as without a name
            ["processors", "status", ""],
            "InvalidIdentifierError: processor name must not be empty",
        ),
    ],
)
def test_an_empty_identifier_is_refused_not_nothing_to_do(
    tmp_path: Path, args: list[str], line: str
) -> None:
    url = f"sqlite:///{tmp_path}/j.db"
    assert _run("init", "--journal", url)[0] == 0
    code, out, err = _run(*args, "--journal", url)
    assert (code, out, err) == (1, "", f"Error: {line}\n")


@pytest.mark.parametrize(
    "args",
    [
        ["verify", "--partitions", "0"],
        ["reconcile", "rebuild", "--all", "--partitions", "-3"],
        ["verify", "--partitions", "1025"],  # a query each to find its bounds: 10**9 hung
    ],
)
def test_spark_partitions_must_be_in_range(tmp_path: Path, args: list[str]) -> None:
    code, _, err = _run(*args, "--journal", f"sqlite:///{tmp_path}/j.db")
    assert code == 2
    assert err.startswith("Error: Invalid value for '--partitions'")


_ONE_ID = "only with --all; a single persistence id is rebuilt in place"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["p", "--master", "local[1]"], f"--master applies {_ONE_ID}"),
        (["p", "--truncate", "--master", "local[2]"], f"--truncate, --master apply {_ONE_ID}"),
        (["--all", "--tag", "a"], "--tag applies to one persistence id; --all rebuilds every tag"),
        (  # --master was ignored: the rebuild ran in this process
            ["--all", "--local", "--master", "local[2]"],
            "--master applies to the Spark job; --local rebuilds in this process",
        ),
        (
            ["--all", "--local", "--partitions", "8", "--master", "local[2]"],
            "--partitions, --master apply to the Spark job; --local rebuilds in this process",
        ),
        (["p", "--executor-timeout-ms", "5000"], f"--executor-timeout-ms applies {_ONE_ID}"),
        (
            ["--all", "--local", "--executor-timeout-ms", "5000"],
            "--executor-timeout-ms applies to the Spark job; --local rebuilds in this process",
        ),
    ],
)
def test_options_of_the_other_rebuild_are_usage_errors(
    tmp_path: Path, args: list[str], message: str
) -> None:
    """Options of the other form of rebuild exit 2, as usage errors do; they exited 1."""
    url = f"sqlite:///{tmp_path}/j.db"
    assert _run("init", "--journal", url)[0] == 0
    code, _, err = _run("reconcile", "rebuild", *args, "--journal", url)
    assert (code, err) == (2, f"Error: {message}; see 'ordo reconcile rebuild --help'\n")


def test_a_spark_variable_set_for_every_command_is_no_option_of_the_other_rebuild(
    journal_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ORDO_EXECUTOR_TIMEOUT_MS, exported for the commands that run Spark, is not a
    --executor-timeout-ms given to the rebuild of one persistence id or to --all --local."""
    write_with_writers(journal_url, writers=1, pids=1, appends=2)
    before = tag_view_rows(journal_url)
    monkeypatch.setenv("ORDO_EXECUTOR_TIMEOUT_MS", "5000")
    j = ("--journal", journal_url)
    assert _run("reconcile", "rebuild", "w0-p0", *j)[0] == 0
    assert _run("reconcile", "rebuild", "--all", "--local", *j)[0] == 0
    assert tag_view_rows(journal_url) == before


def test_rebuild_all_with_truncate_reports_both_in_its_json(journal_url: str) -> None:
    """--json gave the rebuild's writes only; the truncate's deletes went to stderr alone."""
    write_with_writers(journal_url, writers=2, pids=2, appends=3)
    before = tag_view_rows(journal_url)
    j = ("--journal", journal_url)
    code, out, _ = _run("reconcile", "rebuild", "--all", "--local", "--truncate", *j, "--json")
    assert code == 0
    receipt = json.loads(out)
    assert (receipt["deleted"]["tag_view_rows"], receipt["written_rows"]) == (
        len(before),
        len(before),
    )
    assert receipt["deleted"]["progress_rows"] > 0
    assert tag_view_rows(journal_url) == before


def test_rebuild_all_truncates_only_once_spark_has_started(tmp_path: Path) -> None:
    """A --master Spark refused (local[0]: no threads) failed after the truncate: the tag
    views were left empty."""
    url = f"sqlite:///{tmp_path}/j.db"
    write_with_writers(url, writers=1, pids=2, appends=2)
    before = tag_view_rows(url)
    command = ["reconcile", "rebuild", "--all", "--truncate", "--master", "local[0]"]
    rebuild = spark_command(*command, "--journal", url, spark_log=tmp_path / "spark.log")
    assert rebuild.returncode == 1
    assert rebuild.stderr.splitlines()[-1].startswith(
        "Error: ConfigurationError: Spark did not start with master 'local[0]': "
    )
    assert "truncate tag views" not in rebuild.stderr
    assert tag_view_rows(url) == before


_STOPPED_COMMANDS = {
    "cleanup before": (["cleanup", "before", "NOW"], "cleanup interrupted: the batches deleted "),
    "cleanup expire": (
        ["cleanup", "expire", "--time-to-live-ms", "1"],
        "cleanup interrupted: the batches deleted ",
    ),
    "rebuild --all --local": (
        ["reconcile", "rebuild", "--all", "--local"],
        "rebuild interrupted: the rows written so far stay",
    ),
}
"""A long command on the tag views that stops between batches: its arguments, its stop line."""


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("command", sorted(_STOPPED_COMMANDS))
def test_a_stopped_cleanup_or_local_rebuild_says_so_in_one_line(
    tmp_path: Path, command: str, stop: signal.Signals
) -> None:
    """Ctrl-C printed click's "Aborted!" and exited 1, not saying what was left. SIGTERM (a
    service manager's stop, `kill`) ended the command at once, without that line (nor the newest
    progress line held back, which says how far it got) and without an exit status of its own.

    The command's stderr is a full pipe, so its first progress line holds it mid-work until the
    test reads: a slow test (a loaded machine) once sent Ctrl-C after it had finished. The
    rebuild starts from truncated tag views and prints its first line after 1,000 ids.
    """
    url = f"sqlite:///{tmp_path}/j.db"
    ids = 1_010 if command.startswith("rebuild") else 100
    with open_journal(url, settings=WRITE) as journal:
        for n in range(ids):
            journal.append(f"p{n}", [NewEvent.of(k, tags=["a", "b"]) for k in range(20)])
    if command.startswith("rebuild"):
        assert _run("reconcile", "truncate", "--journal", url)[0] == 0
    rows = execute(url, "SELECT count(*) FROM tag_views")
    arguments, stopped = _STOPPED_COMMANDS[command]
    now = datetime.now(UTC).isoformat()
    given = [now if argument == "NOW" else argument for argument in arguments]
    filler, stderr = os.pipe()
    fill_pipe(stderr)
    running = subprocess.Popen(
        [sys.executable, "-m", "ordo.cli.main", *given, "--journal", url],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env={**os.environ, "ORDO_ROWS_PER_BATCH": "1"},
    )
    os.close(stderr)
    with open(filler, encoding="utf-8") as err_pipe:
        wait_for(
            lambda: execute(url, "SELECT count(*) FROM tag_views") != rows,
            timeout=60,
            what="the command to change the tag views",
        )
        running.send_signal(stop)
        err = err_pipe.read()  # until the command ends
    out, _ = running.communicate(timeout=30)
    assert (running.returncode, out) == (128 + stop, "")
    assert err.splitlines()[-1].startswith(stopped)
    assert execute(url, "SELECT count(*) FROM tag_views") != rows


def test_cleanup_prints_its_progress_every_few_seconds_not_per_batch(tmp_path: Path) -> None:
    """A line per batch: 10M rows in batches of 1,000 printed 10,000 lines."""
    url = f"sqlite:///{tmp_path}/j.db"
    with open_journal(url, settings=WRITE) as journal:
        for n in range(10):
            journal.append(f"p{n}", [NewEvent.of(k, tags=["a", "b"]) for k in range(10)])
    now = datetime.now(UTC).isoformat()
    result = CliRunner().invoke(
        cli, ["cleanup", "before", now, "--journal", url], env={"ORDO_ROWS_PER_BATCH": "1"}
    )
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.splitlines()
    assert 2 <= len(lines) <= 4  # the first, the last, and one per 5 s between (200 batches)
    assert lines[-1] == "tag 'b': 100 rows deleted (200 in all)"


@pytest.mark.parametrize("ids", [10_000, 1_010])
def test_rebuild_all_locally_prints_its_progress_every_few_seconds_and_the_total(
    tmp_path: Path, ids: int
) -> None:
    """A line per 1,000 persistence ids (10M ids printed 10,000 lines), the total last.

    The total was missing: the last line was the last thousand, and 10 ids printed none.
    """
    url = f"sqlite:///{tmp_path}/j.db"
    with open_journal(url, settings=WRITE) as journal:
        for n in range(ids):
            journal.append(f"p{n}", [NewEvent.of(n, tags=["a"])])
    code, _, err = _run("reconcile", "rebuild", "--all", "--local", "--journal", url)
    assert code == 0, err
    lines = err.splitlines()
    assert 2 <= len(lines) <= 4  # the first, the last, and one per 5 s between (10 lines)
    assert lines[-1] == f"{ids:,} persistence ids, {ids:,} rows"


@pytest.mark.parametrize(
    ("command", "overridden"),
    [
        (["cleanup", "before"], "tracking processors have not read the newest row it deletes"),
        (["cleanup", "expire"], "tracking processors have not read the newest row it deletes"),
        (["cleanup", "delete"], "live writers hold leases"),
        (["reconcile", "truncate"], "live writers hold leases"),
    ],
)
def test_the_force_help_says_what_the_command_checks(command: list[str], overridden: str) -> None:
    """cleanup before|expire's --force spoke of writer leases, which they do not check."""
    code, out, _ = _run(*command, "--help")
    assert code == 0
    options = out.split("Options:", 1)[1]
    force = " ".join(options.split("--force", 1)[1].split("--", 1)[0].split())
    assert force.startswith(f"Go on although {overridden}")
    assert ("lease" in force) == (overridden == "live writers hold leases")
