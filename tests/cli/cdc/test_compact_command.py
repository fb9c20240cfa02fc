"""`ordo cdc compact`: a line per table, --json, and bad input refused with nothing changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cdc_cli_support import log_files, one_line_error, readings, registered, run_ordo
from ordo.storage.lock_file import exclusive_lock
from ordo.storage.parquet import ParquetChangeLog
from ordo.storage.parquet.compaction import COMPACTION_LOCK


def ingested(tmp_path: Path, journal: str, count: int) -> Path:
    """A change log of `count` ingested inputs, a file each (positions 1..count); its root."""
    ingest = registered(tmp_path, journal)
    inputs = []
    for position in range(1, count + 1):
        inputs.append(tmp_path / f"{position}.jsonl")
        inputs[-1].write_text(readings(position=position) + "\n")
    assert run_ordo(*ingest, *map(str, inputs))[0] == 0
    return tmp_path / "log"


def test_compact_merges_each_table_s_files_and_says_so(tmp_path: Path, journal: str) -> None:
    log = ingested(tmp_path, journal, 5)
    assert len(ParquetChangeLog(log).files("readings")) == 5
    code, out, err = run_ordo("cdc", "compact", "--change-log", str(log), "--max-rows", "3")
    assert code == 0, err
    assert out == "readings: 5 files -> 2, 5 rows\n"
    assert "compacting readings: partition=" in err
    assert [f.name for _, f in ParquetChangeLog(log).files("readings")] == [
        "seg-1-3.parquet",
        "seg-4-5.parquet",
    ]
    code, out, err = run_ordo("cdc", "compact", "--change-log", str(log), "--json")
    assert code == 0, err
    assert json.loads(out) == {
        "tables": [
            {"table": "readings", "files_before": 2, "files_after": 1, "rows": 5, "leftovers": 0}
        ]
    }


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        (("--table", "orders"), "ConfigurationError: no change log of table 'orders' in "),
        (("--table", "a/b"), "InvalidInputError: table name 'a/b' cannot name a change log"),
        (("--change-log", "{tmp}/missing"), "no change log directory {tmp}/missing: check"),
        (("--change-log", "{tmp}"), "ConfigurationError: {tmp} holds no table's change log"),
    ],
)
def test_bad_input_is_one_line_with_nothing_changed(
    tmp_path: Path, journal: str, arguments: tuple[str, ...], problem: str
) -> None:
    log = ingested(tmp_path, journal, 3)
    before = log_files(log)
    given = [a.format(tmp=tmp_path) for a in arguments]
    code, _, err = run_ordo("cdc", "compact", "--change-log", str(log), *given)
    one_line_error(code, err, problem.format(tmp=tmp_path))
    assert log_files(log) == before
    assert not (tmp_path / "missing").exists()


def test_max_rows_below_one_and_a_running_compaction_are_refused(
    tmp_path: Path, journal: str
) -> None:
    log = ingested(tmp_path, journal, 3)
    before = log_files(log)
    code, _, err = run_ordo("cdc", "compact", "--change-log", str(log), "--max-rows", "0")
    assert code == 2
    assert "Invalid value for '--max-rows': 0 is not in the range 1<=x" in err
    running = "a compaction of the change log of table 'readings' is already running"
    with exclusive_lock(log / "readings" / COMPACTION_LOCK, running):
        code, _, err = run_ordo("cdc", "compact", "--change-log", str(log))
        one_line_error(code, err, f"AlreadyRunningError: {running} (pid ")
    assert log_files(log) == before
