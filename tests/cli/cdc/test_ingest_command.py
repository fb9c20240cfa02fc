"""`ordo cdc ingest`: the schema it needs, files checked whole before any is published,
mutations without a position, and the change log's partition count.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cdc_cli_support import log_files, one_line_error, readings, registered, run_ordo
from ordo.cdc import mutation_to_json, partition_of
from ordo.simulation.cdc import SIMULATED_SCHEMA, ReplicaWorkload, replica_mutations
from processing_support import wait_for
from sqlite_support import LATEST, older_journal, stored_version


def test_ingest_needs_a_schema_and_rejects_a_malformed_line_whole(
    tmp_path: Path, journal: str
) -> None:
    lines = [
        json.dumps(mutation_to_json(m))
        for m in replica_mutations(ReplicaWorkload(mutations=30, keys=5, replicas=3))
    ]
    log = str(tmp_path / "log")
    ingest = ("cdc", "ingest", "--journal", journal, "--change-log", log)
    code, _, err = run_ordo(*ingest, stdin="\n".join(lines))
    assert code == 1
    assert err.startswith("Error: StorageUnavailableError: no journal at")
    assert not (tmp_path / "ordo.db").exists()

    assert run_ordo("init", "--journal", journal)[0] == 0
    code, _, err = run_ordo(*ingest, stdin="\n".join(lines))
    assert code == 1
    assert "UnknownSchemaError" in err

    schema_file = tmp_path / "readings.json"
    schema_file.write_text(SIMULATED_SCHEMA.to_json())
    code, out, _ = run_ordo("cdc", "schemas", "register", str(schema_file), "--journal", journal)
    assert code == 0
    assert out.startswith("readings v1")

    broken = "\n".join([*lines[:3], "{not json", *lines[3:]])
    code, _, err = run_ordo(
        "cdc", "ingest", "--journal", journal, "--change-log", log, stdin=broken
    )
    assert code == 1
    assert "MalformedMutationError: line 4" in err
    assert not (tmp_path / "log").exists()

    code, out, _ = run_ordo(
        "cdc", "ingest", "--journal", journal, "--change-log", log, stdin="\n".join(lines)
    )
    assert code == 0
    assert out.strip() == f"stdin: published {len(lines)}, skipped 0"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (
            readings()[:-1] + ', "bogus": 1}',
            "line 2 of {file}: the mutation has unknown key 'bogus' (valid keys: table, ",
        ),
        (
            readings(position=-13),
            "line 2 of {file}: audit field 'position' must be an integer >= 0, got -13",
        ),
        (
            readings().replace('"ok"', "NaN"),
            "line 2 of {file}: NaN is not a JSON number (JSON has no NaN or infinities)",
        ),
        (
            readings().replace('"partition_key": [1]', '"partition_key": [-Infinity]'),
            "line 2 of {file}: -Infinity is not a JSON number",
        ),
        (readings().replace('"ok"', "1e999"), "line 2 of {file}: number 1e999 is out of the"),
        (  # was published as 0.1 without a word, as the captures did before they set it aside
            readings().replace('"ok"', "0.10000000000000000001"),
            "line 2 of {file}: number 0.10000000000000000001 is rounded to 0.1 as a double",
        ),
        (
            readings().replace('"partition_key": [1]', '"partition_key": [1e-400]'),
            "line 2 of {file}: number 1e-400 is rounded to 0.0 as a double",
        ),
        (
            readings().replace('"readings"', '"unregistered"'),
            "UnknownSchemaError: line 2 of {file}: no schema is registered for table "
            "'unregistered'",
        ),
        (
            readings().replace('"ok"', '"\\ud800"'),
            "MalformedMutationError: {file}: mutation of table 'readings' key (1, 2): ",
        ),
        (  # deeper than Python's json module reads: a RecursionError's traceback
            "[" * 100_000 + "]" * 100_000,
            "MalformedMutationError: line 2 of {file}: nested deeper than the ",
        ),
        (  # the json module kept the last one, without a word
            readings()[:-1] + ', "table": "other"}',
            "MalformedMutationError: line 2 of {file}: duplicate key 'table'",
        ),
        (
            readings(segment="seg\x00"),
            "MalformedMutationError: {file}: audit segment 'seg\\x00' contains a NUL character",
        ),
    ],
)
def test_ingest_checks_every_file_before_it_publishes_any(
    tmp_path: Path, journal: str, line: str, problem: str
) -> None:
    ingest = registered(tmp_path, journal)
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_text(readings() + "\n")
    bad.write_text(f"{readings(position=2)}\n{line}\n")
    code, _, err = run_ordo(*ingest, str(good), str(bad))
    one_line_error(code, err, problem.format(file=bad))
    assert not (tmp_path / "log").exists()

    code, out, err = run_ordo(*ingest, str(good))
    assert code == 0, err
    assert out == f"{good}: published 1, skipped 0\n"


def test_ingest_names_a_file_that_is_not_text(tmp_path: Path, journal: str) -> None:
    ingest = registered(tmp_path, journal)
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\x00{}")
    code, _, err = run_ordo(*ingest, str(binary))
    one_line_error(code, err, f"MalformedMutationError: {binary}: not a text file: ")
    assert not (tmp_path / "log").exists()


def test_ingest_skips_a_byte_order_mark_at_the_start_of_an_input(
    tmp_path: Path, journal: str
) -> None:
    """Editors on Windows write one: line 1 was "Expecting value: line 1 column 1"."""
    ingest = registered(tmp_path, journal)
    marked = tmp_path / "marked.jsonl"
    marked.write_text(f"\ufeff{readings()}\n", encoding="utf-8")
    code, out, err = run_ordo(*ingest, str(marked))
    assert (code, out) == (0, f"{marked}: published 1, skipped 0\n"), err
    code, out, err = run_ordo(*ingest, stdin=f"\ufeff{readings(position=2)}\n")
    assert (code, out) == (0, "stdin: published 1, skipped 0\n"), err


def test_ingest_keeps_every_mutation_without_a_position_where_spark_sees_it(
    tmp_path: Path, journal: str
) -> None:
    ingest = registered(tmp_path, journal)
    unpositioned = tmp_path / "unpositioned.jsonl"
    unpositioned.write_text(readings(segment=None, position=None) + "\n")
    for _ in range(2):
        code, out, err = run_ordo(*ingest, str(unpositioned))
        assert code == 0, err
        assert out == f"{unpositioned}: published 1, skipped 0\n"
    files = list((tmp_path / "log" / "readings").glob("partition=*/*"))
    assert len(files) == 2
    assert not [f for f in files if f.name.startswith(("_", "."))]  # Spark skips those


def test_ingest_refuses_another_partition_count_and_follows_the_log_without_one(
    tmp_path: Path, journal: str
) -> None:
    ingest = registered(tmp_path, journal)
    log = tmp_path / "log"
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text(readings() + "\n")
    second.write_text(readings(position=2) + "\n")
    for expected in ("published 1, skipped 0", "published 0, skipped 1"):
        code, out, err = run_ordo(*ingest, str(first))
        assert (code, out) == (0, f"{first}: {expected}\n"), err
    before = log_files(log)
    for given in (first, second):
        code, out, err = run_ordo(*ingest, "--partitions", "3", str(given))
        one_line_error(
            code,
            err,
            "PartitionCountMismatchError: table 'readings': its change log has 8 partitions, a "
            "publish with 3 is refused (a key's changes must stay in one partition): use "
            "--partitions 8 (partitions=8), or leave it out to follow the log",
        )
        assert out == ""
    assert log_files(log) == before

    code, out, err = run_ordo(*ingest, "--partitions", "8", str(first), str(second))
    assert (code, out) == (
        0,
        f"{first}: published 0, skipped 1\n{second}: published 1, skipped 0\n",
    )
    assert [p.parent.name for p in sorted((log / "readings").glob("*/*.parquet"))] == [
        f"partition={partition_of((1,), 8)}"
    ] * 2

    other = tmp_path / "other"  # a log started with 3 partitions is followed by plain ingests
    for args in (("--partitions", "3", str(first)), (str(second),)):
        code, _, err = run_ordo(*ingest[:-1], str(other), *args)
        assert code == 0, err
    assert [p.parent.name for p in sorted((other / "readings").glob("*/*.parquet"))] == [
        f"partition={partition_of((1,), 3)}"
    ] * 2


def test_ingest_leaves_an_older_journal_as_it_is(tmp_path: Path) -> None:
    """It only reads the schemas there: it upgraded the journal, altering tables under the
    writers of the older ordo, which only `ordo init` may do."""
    older = tmp_path / "older.db"
    older_journal(older)
    mutation = tmp_path / "one.jsonl"
    mutation.write_text(readings(), encoding="utf-8")
    code, _, err = run_ordo(
        "cdc", "ingest", "--journal", str(older), "--change-log", str(tmp_path / "log"),
        str(mutation),
    )  # fmt: skip
    one_line_error(code, err, f"SchemaVersionError: journal schema version {LATEST - 1} is older")
    assert stored_version(older) == LATEST - 1
    assert not (tmp_path / "log").exists()


def test_ingest_says_which_files_went_in_when_a_later_one_fails_to_publish(
    tmp_path: Path, journal: str
) -> None:
    """The change log has no transaction across files: each goes in as its own publish. A
    failure left the files before it published and said nothing of them (their lines came
    only after the last file), so an operator could not tell what a re-run would repeat."""
    ingest = registered(tmp_path, journal)
    other = next(k for k in range(2, 99) if partition_of((k,), 8) != partition_of((1,), 8))
    first, second, third = (tmp_path / f"{name}.jsonl" for name in ("first", "second", "third"))
    first.write_text(readings() + "\n")
    moved = readings(position=2).replace('"partition_key": [1]', f'"partition_key": [{other}]')
    second.write_text(moved + "\n")
    third.write_text(readings(position=3) + "\n")
    blocker = tmp_path / "log" / "readings" / f"partition={partition_of((other,), 8)}"
    blocker.parent.mkdir(parents=True)
    blocker.write_text("not a folder")
    code, out, err = run_ordo(*ingest, str(first), str(second), str(third))
    assert (code, out) == (1, f"{first}: published 1, skipped 0\n")
    notice, error = err.splitlines()
    assert notice == (
        f"{second}: not published, or in part; not published: {third}; running the command "
        "again publishes what the change log lacks"
    )
    assert error.startswith("Error: StorageAccessError: cannot write change log ")

    blocker.unlink()
    code, out, err = run_ordo(*ingest, str(first), str(second), str(third))
    assert (code, out) == (
        0,
        f"{first}: published 0, skipped 1\n{second}: published 1, skipped 0\n"
        f"{third}: published 1, skipped 0\n",
    ), err


def test_a_segment_too_long_for_a_file_name_is_refused_before_any_file_is_published(
    tmp_path: Path, journal: str
) -> None:
    """Its file name was refused by the file system only while publishing: the inputs before it
    were in the change log, though every input is checked before any is published."""
    ingest = registered(tmp_path, journal)
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text(readings() + "\n")
    segment = "10.0.0.1:/var/lib/cassandra/cdc_raw/" + "x" * 200 + "/CommitLog-7-1.log"
    second.write_text(readings(segment=segment, position=2) + "\n")

    code, out, err = run_ordo(*ingest, str(first), str(second))

    assert out == ""
    one_line_error(code, err, "InvalidInputError: ")
    assert "is too long to name a change log file" in err
    assert log_files(tmp_path / "log") == {}


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_ingest_says_what_is_left_in_one_line_and_leaves_no_staged_file(
    tmp_path: Path, journal: str, stop: signal.Signals
) -> None:
    """Ctrl-C printed click's "Aborted!" and exited 1; SIGTERM (a service manager's stop) ended
    the ingest at once, without a word, leaving the publish in flight's hidden staged files in
    the change log. A stop raised into the publish's wait for its writers broke a lock of its
    thread pool now and then (status 1, "cannot release un-acquired lock")."""
    ingest = registered(tmp_path, journal)
    inputs = [tmp_path / f"{n}.jsonl" for n in range(20)]
    for n, path in enumerate(inputs):
        path.write_text(
            "".join(
                readings(position=n * 2_000 + k).replace(
                    '"partition_key": [1]', f'"partition_key": [{k}]'
                )
                + "\n"
                for k in range(2_000)
            ),
            encoding="utf-8",
        )
    command = [sys.executable, "-m", "ordo", *ingest, *map(str, inputs)]
    running = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = tmp_path / "log" / "readings"
    wait_for(
        lambda: any(log.rglob("*.parquet")),
        timeout=60,
        what="the ingest to publish its first input",
    )
    running.send_signal(stop)
    out, err = running.communicate(timeout=60)

    published = len(out.splitlines())  # a line for each input published
    left, *rest = inputs[published:]
    after = f"; not published: {', '.join(map(str, rest))}" if rest else ""
    assert (running.returncode, err) == (
        128 + stop,
        f"cdc ingest interrupted: {left}: not published, or in part{after}; running the command "
        "again publishes what the change log lacks\n",
    )
    assert [f.name for f in log.rglob(".*")] == []  # the input in flight was finished
