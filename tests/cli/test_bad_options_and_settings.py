"""Bad flags are one-line usage errors; bad ORDO_ variables name the variable."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from cli_support import run as _run
from ordo.cli.command_group import CommandGroup
from ordo.cli.root import cli


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["info", "--bogus"],
            "Error: No such option '--bogus' (valid: --journal, --json, --help); "
            "see 'ordo info --help'",
        ),
        (
            ["cdc", "bogus"],
            "Error: No such command 'bogus' (valid: capture, compact, ingest, materialize, "
            "schemas, simulate, status); see 'ordo cdc --help'",
        ),
        (
            ["--bogus"],
            "Error: No such option '--bogus' (valid: --debug, --log-level, --version, --help); "
            "see 'ordo --help'",
        ),
        (["events"], "Error: Missing argument 'PERSISTENCE_ID'; see 'ordo events --help'"),
        (
            ["events", "p", "--to", "99999999999999999999"],
            "Error: Invalid value for '--to': 99999999999999999999 is not in the range "
            "1<=x<=9007199254740991; see 'ordo events --help'",
        ),
        (
            ["events", "p", "--from", "0"],
            "Error: Invalid value for '--from': 0 is not in the range 1<=x<=9007199254740991; "
            "see 'ordo events --help'",
        ),
        (
            ["events", "p", "--from", "-1"],
            "Error: Invalid value for '--from': -1 is not in the range 1<=x<=9007199254740991; "
            "see 'ordo events --help'",
        ),
        (
            ["events", "p", "--to", "0"],
            "Error: Invalid value for '--to': 0 is not in the range 1<=x<=9007199254740991; "
            "see 'ordo events --help'",
        ),
        (
            ["events", "p", "--from", "5", "--to", "2"],
            "Error: Invalid value for '--to': 2 is before --from 5; see 'ordo events --help'",
        ),
        (  # an InvalidInputError of the token store, exit status 1
            ["processors", "split", "p", "99999999999999999999"],
            "Error: Invalid value for 'SEGMENT_ID': 99999999999999999999 is not in the range "
            "0<=x<=9007199254740991; see 'ordo processors split --help'",
        ),
        (  # an UnknownSchemaError, exit status 1
            ["cdc", "schemas", "accept", "t", "99999999999999999999"],
            "Error: Invalid value for 'VERSION': 99999999999999999999 is not in the range "
            "1<=x<=9007199254740991; see 'ordo cdc schemas accept --help'",
        ),
    ],
)
def test_a_usage_error_is_one_line_with_status_2(
    runner: CliRunner, args: list[str], line: str
) -> None:
    code, out, err = _run(runner, *args)
    assert (code, out, err) == (2, "", line + "\n")


@pytest.mark.parametrize("command", ["split", "merge", "release"])
@pytest.mark.parametrize("value", ["-1", "-12"])
def test_a_negative_segment_id_is_refused_as_out_of_range(
    runner: CliRunner, command: str, value: str
) -> None:
    """click read `-1` as an unknown option: "No such option '-1'"."""
    line = (
        f"Error: Invalid value for 'SEGMENT_ID': {value} is not in the range "
        f"0<=x<=9007199254740991; see 'ordo processors {command} --help'\n"
    )
    for args in (["p", value], ["p", value, "--journal", "j.db"], ["p", "--", value]):
        assert _run(runner, "processors", command, *args) == (2, "", line)


def test_a_negative_schema_version_is_refused_as_out_of_range(runner: CliRunner) -> None:
    code, out, err = _run(runner, "cdc", "schemas", "accept", "t", "-1")
    assert (code, out) == (2, "")
    assert err == (
        "Error: Invalid value for 'VERSION': -1 is not in the range 1<=x<=9007199254740991; "
        "see 'ordo cdc schemas accept --help'\n"
    )


@pytest.mark.parametrize(
    ("args", "code", "line"),
    [
        (  # the value of --journal, as before
            ["p", "1", "--journal", "-1"],
            1,
            "Error: StorageUnavailableError: no journal at -1: create it with `ordo init` or by "
            "appending to it",
        ),
        (
            ["p", "-x", "1"],
            2,
            "Error: No such option '-x' (valid: --journal, --replace-hand-over, --help); an "
            "argument that starts with - goes after --, as in 'ordo processors split [OPTIONS] "
            "-- PROCESSOR SEGMENT_ID'; see 'ordo processors split --help'",
        ),
    ],
)
def test_only_negative_numbers_are_read_as_arguments(
    runner: CliRunner, args: list[str], code: int, line: str
) -> None:
    assert _run(runner, "processors", "split", *args) == (code, "", line + "\n")


@pytest.mark.parametrize(
    ("args", "valid", "usage"),
    [
        (
            ["events", "-1"],
            "--from, --journal, --json, --to",
            "ordo events [OPTIONS] -- PERSISTENCE_ID",
        ),
        (
            ["query", "-x"],
            "--journal, --json, --limit, --live, --offset",
            "ordo query [OPTIONS] -- TAG",
        ),
        (["append", "-f"], "--journal, --json", "ordo append [OPTIONS] -- [FILE]"),
    ],
)
def test_an_argument_that_starts_with_a_dash_is_told_to_go_after_two_dashes(
    runner: CliRunner, args: list[str], valid: str, usage: str
) -> None:
    """It said only "No such option '-1'": nothing told the user that `--` ends the options."""
    assert _run(runner, *args) == (
        2,
        "",
        f"Error: No such option '{args[1]}' (valid: {valid}, --help); an argument that starts "
        f"with - goes after --, as in '{usage}'; see 'ordo {args[0]} --help'\n",
    )


@pytest.mark.parametrize(
    ("args", "word", "valid"),
    [
        (["events", "-abc"], "-abc", "--from, --journal, --json, --to"),
        (["events", "p", "-xyz", "--json"], "-xyz", "--from, --journal, --json, --to"),
        # -abx is --journal's value: the word that failed is -abc.
        (["events", "--journal", "-abx", "-abc"], "-abc", "--from, --journal, --json, --to"),
        (["query", "t", "-1x"], "-1x", "--journal, --json, --limit, --live, --offset"),
        (["append", "-abc"], "-abc", "--journal, --json"),
        (["processors", "split", "p", "-abc"], "-abc", "--journal, --replace-hand-over"),
        (["cdc", "schemas", "accept", "t", "-abc"], "-abc", "--journal"),
    ],
)
def test_an_unknown_word_of_short_options_is_named_as_typed(
    runner: CliRunner, args: list[str], word: str, valid: str
) -> None:
    """click reads `-abc` as `-a -b -c` and reported the first unknown one: "No such option
    '-a'", an option the user never typed."""
    code, out, err = _run(runner, *args)
    assert (code, out) == (2, "")
    assert err.startswith(f"Error: No such option '{word}' (valid: {valid}, --help); an ")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["-abc"],
            "Error: No such option '-abc' (valid: --debug, --log-level, --version, --help); "
            "see 'ordo --help'",
        ),
        (
            ["processors", "-abc"],
            "Error: No such option '-abc' (valid: --help); see 'ordo processors --help'",
        ),
        (
            ["info", "-abc"],
            "Error: No such option '-abc' (valid: --journal, --json, --help); "
            "see 'ordo info --help'",
        ),
        (
            ["events", "-json", "p"],
            "Error: No such option '-json'. Did you mean '--json'?; see 'ordo events --help'",
        ),
        (
            ["events", "p", "-journal=j.db"],
            "Error: No such option '-journal=j.db'. Did you mean '--journal'?; "
            "see 'ordo events --help'",
        ),
    ],
)
def test_an_unknown_word_of_a_group_or_of_a_command_without_arguments_is_named_as_typed(
    runner: CliRunner, args: list[str], line: str
) -> None:
    """`-json` said "No such option '-j'": a long option with one dash too few is told."""
    assert _run(runner, *args) == (2, "", line + "\n")


def test_the_ordo_program_names_the_word_it_was_given() -> None:
    """The console script's entry point (`python -m ordo`), not only the command in-process."""
    done = subprocess.run(
        [sys.executable, "-m", "ordo", "events", "-abc"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("Error: No such option '-abc' (valid: ")


def _commands(
    group: click.Group, words: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """The words and the command of every command of `group`, its subgroups' too."""
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from _commands(command, (*words, name))
        else:
            yield (*words, name), command


def _integer_parameters() -> Iterator[tuple[str, click.Command, click.Parameter]]:
    """Every integer option and argument: its command's words and its name, command, itself."""
    for words, command in _commands(cli):
        for param in command.params:
            if isinstance(param.type, click.types.IntParamType):
                named = (
                    param.opts[0] if isinstance(param, click.Option) else param.human_readable_name
                )
                yield " ".join((*words, named)), command, param


INTEGER_PARAMETERS = [
    pytest.param(command, param, id=name) for name, command, param in _integer_parameters()
]


def test_integer_parameters_are_found() -> None:
    names = {name for name, _, _ in _integer_parameters()}
    assert {"events --to", "processors split SEGMENT_ID", "cdc capture --max-changes"} <= names


@pytest.mark.parametrize("text", ["1_000", "+5", " 5", "5 ", "\u0665", "\uff15"])
@pytest.mark.parametrize(("command", "param"), INTEGER_PARAMETERS)
def test_an_integer_option_takes_only_plain_ascii_digits(
    command: click.Command, param: click.Parameter, text: str
) -> None:
    """int() took `1_000`, `+5`, ` 5 ` and other scripts' digits (an Arabic-Indic five), unlike
    the ORDO_* settings now: a number no one writes so, or another reader (a shell) reads
    otherwise. Every integer option and argument of every command is checked, so one added
    later with click's own IntRange fails here."""
    with pytest.raises(click.BadParameter, match=f"^{re.escape(repr(text))} is not an integer"):
        param.type.convert(text, param, click.Context(command))


def test_an_integer_option_written_with_digit_groups_is_a_usage_error(runner: CliRunner) -> None:
    assert _run(runner, "events", "p", "--to", "1_000") == (
        2,
        "",
        "Error: Invalid value for '--to': '1_000' is not an integer (plain digits 0-9, with a "
        "leading - for a negative number); see 'ordo events --help'\n",
    )


def test_every_group_of_the_command_line_records_the_words_of_its_commands() -> None:
    """A group that did not (a plain click.Group) left its commands' unknown words unnamed."""
    groups: list[click.Group] = [cli]
    while groups:
        group = groups.pop()
        assert isinstance(group, CommandGroup), group.name
        groups += [c for c in group.commands.values() if isinstance(c, click.Group)]


def test_a_persistence_id_and_a_tag_that_start_with_a_dash_are_read_after_two_dashes(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORDO_EVENTUAL_CONSISTENCY_DELAY_MS", "0")
    url = f"sqlite:///{tmp_path / 'j.db'}"
    line = json.dumps({"persistence_id": "-1", "payload": {"n": 1}, "tags": ["-x"]})
    assert _run(runner, "append", "--journal", url, stdin=line)[0] == 0
    code, out, _ = _run(runner, "events", "--journal", url, "--json", "--", "-1")
    assert (code, [event["payload"] for event in json.loads(out)]) == (0, [{"n": 1}])
    code, out, _ = _run(runner, "query", "--journal", url, "--json", "--", "-x")
    assert (code, [json.loads(event)["persistence_id"] for event in out.splitlines()]) == (
        0,
        ["-1"],
    )


def test_an_unknown_option_of_a_command_without_arguments_has_no_advice_on_dashes(
    runner: CliRunner,
) -> None:
    assert _run(runner, "info", "-x")[2] == (
        "Error: No such option '-x' (valid: --journal, --json, --help); see 'ordo info --help'\n"
    )


_CAPTURE = ["cdc", "capture", "source.db", "--table", "t", "--change-log", "log"]


@pytest.mark.parametrize(
    "args",
    [
        ["cleanup", "expire", "--time-to-live-ms", "99999999999999999999"],
        ["reconcile", "delete", "p", "--writer-lease-timeout-ms", "99999999999999999999"],
        ["simulate", "--events", "99999999999999999999"],
        # Writer tracebacks, then "every writer process failed": their clocks left the TimeUUIDs.
        ["simulate", "--skew-ms", "99999999999"],
        # An OffsetFormatError deep in each query, and a run that waited for ever.
        ["simulate", "--consistency-delay-ms", "9007199254740991"],
        ["simulate", "--gap-timeout-ms", "9007199254740991"],
        # A delayed tag write's wait overflowed its thread (a traceback) and the verdict
        # counted every delayed event as lost.
        ["simulate", "--events", "20", "--max-delay-ms", "9007199254740991"],
        # Durations beyond a hundred years (LONGEST_DURATION), as in the settings: expire went
        # back to 1582 ("nothing to do"), a capture's lease or flush interval to the same.
        ["cleanup", "expire", "--time-to-live-ms", "9007199254740991"],
        ["reconcile", "delete", "p", "--writer-lease-timeout-ms", "9007199254740991"],
        [*_CAPTURE, "--flush-interval-ms", "9007199254740991"],
        [*_CAPTURE, "--reconnect-timeout-ms", "9007199254740991"],
    ],
)
def test_a_huge_number_is_a_usage_error_naming_its_option(
    runner: CliRunner, tmp_path: Path, args: list[str]
) -> None:
    code, _, err = _run(runner, *args, "--journal", f"{tmp_path}/j.db")
    assert code == 2
    assert err.startswith(f"Error: Invalid value for '{args[-2]}'")
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("value", ["-5", "5000", "15000"])
def test_a_lease_timeout_not_above_the_lease_deadline_is_a_usage_error_naming_the_bound(
    runner: CliRunner, tmp_path: Path, value: str
) -> None:
    """It exited 1 with the settings' ConfigurationError, and --help showed no lower bound.

    The bound is the 15 s a journal appends after its lease's last renewal: with a shorter
    timeout a tool could take a live writer's lease for a crashed one's.
    """
    url = f"sqlite:///{tmp_path}/j.db"
    assert _run(runner, "init", "--journal", url)[0] == 0
    code, _, err = _run(
        runner, "verify", "--repair", "--writer-lease-timeout-ms", value, "--journal", url
    )
    assert code == 2
    assert err.startswith(
        "Error: Invalid value for '--writer-lease-timeout-ms' (env var: "
        f"'ORDO_WRITER_LEASE_TIMEOUT_MS'): {value} is not in the range 15000<x<="
    )
    assert "15000<x<=" in _run(runner, "reconcile", "truncate", "--help")[1]


@pytest.mark.parametrize(
    ("variable", "value", "command", "problem"),
    [
        ("ORDO_MAX_MESSAGE_BATCH_SIZE", "0", "events", "max_message_batch_size must be an"),
        ("ORDO_FLUSH_INTERVAL_MS", "-5", "query", "flush_interval must be a duration >= 0"),
        ("ORDO_REFRESH_INTERVAL_MS", "0", "query", "refresh_interval must be a duration > 0"),
        ("ORDO_WRITER_LEASE_TIMEOUT_MS", "1", "status", "writer_lease_timeout must be longer"),
        ("ORDO_PAGE_SIZE", str(10**30), "query", "page_size is too large: at most 90071992547"),
        ("ORDO_MAX_MESSAGE_BATCH_SIZE", str(2**53), "events", "max_message_batch_size is too"),
        ("ORDO_ROWS_PER_BATCH", str(10**20), "status", "rows_per_batch is too large"),
        (
            "ORDO_EVENTUAL_CONSISTENCY_DELAY_MS",
            "9007199254740991",
            "query",
            "eventual_consistency_delay is too long: at most 3153600000000 ms (36,500 days), got",
        ),
    ],
)
def test_a_setting_out_of_range_in_the_environment_names_the_variable(
    runner: CliRunner,
    journal_url: str,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    value: str,
    command: str,
    problem: str,
) -> None:
    line = json.dumps({"persistence_id": "p", "payload": {}, "tags": ["t"]})
    assert _run(runner, "append", "--journal", journal_url, stdin=line)[0] == 0
    monkeypatch.setenv(variable, value)
    args = {"events": ["events", "p"], "query": ["query", "t"]}.get(command, [command])
    code, _, err = _run(runner, *args, "--journal", journal_url)
    assert code == 1
    assert err.startswith(f"Error: ConfigurationError: {variable}: {problem}")


def test_a_bad_setting_in_the_environment_names_the_key(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORDO_BUCKET_SIZE", "week")
    code, _, err = _run(runner, "events", "p", "--journal", f"{tmp_path}/j.db")
    assert code == 1
    assert "ORDO_BUCKET_SIZE" in err
    assert "week" in err


def test_a_flush_interval_too_long_to_wait_is_refused_before_appending(
    runner: CliRunner, journal_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ordo append` exited 0 with ORDO_FLUSH_INTERVAL_MS=9007199254740991, while the journal's
    flusher thread died at once with an OverflowError (a wait beyond threading.TIMEOUT_MAX),
    leaving its traceback and the tagged events buffered until the journal closed."""
    monkeypatch.setenv("ORDO_FLUSH_INTERVAL_MS", "9007199254740991")
    line = json.dumps({"persistence_id": "p", "payload": {}, "tags": ["t"]})
    code, _, err = _run(runner, "append", "--journal", journal_url, stdin=line)
    assert (code, err) == (
        1,
        "Error: ConfigurationError: ORDO_FLUSH_INTERVAL_MS: flush_interval is too long: at most "
        "3153600000000 ms (36,500 days), got 9007199254740991 ms\n",
    )
    monkeypatch.setenv("ORDO_FLUSH_INTERVAL_MS", "3153600000000")
    assert _run(runner, "append", "--journal", journal_url, stdin=line)[0] == 0
