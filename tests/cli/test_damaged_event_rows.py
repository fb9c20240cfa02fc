"""Stored events whose JSON was damaged (a row changed by hand or by another program).

Each is one line naming the event and what of it is not JSON, as StorageIntegrityError: no
retry mends it. It was json's JSONDecodeError, a traceback of `ordo events` and `ordo query`,
and a bare ValueError that named no event for a library caller.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli_support import run
from ordo import open_journal
from ordo.errors import StorageIntegrityError

_DAMAGE = {
    "payload": "payload = CAST('{oops' AS BLOB)",
    "metadata": "metadata = '{oops'",
    "tags": "tags = '{oops'",
}
"""What each damage sets, in the `messages` row of the event and in its tag_views row."""


def _damaged_journal(tmp_path: Path, runner: CliRunner, column: str) -> str:
    """A journal of one tagged event, o#1, whose `column` holds text that is not JSON."""
    path = tmp_path / "j.db"
    line = '{"persistence_id": "o", "payload": 1, "metadata": {"m": 1}, "tags": ["t"]}'
    assert run(runner, "append", "--journal", str(path), stdin=line)[0] == 0
    with closing(sqlite3.connect(path)) as conn, conn:
        for table in ("messages", "tag_views"):
            conn.execute(f"UPDATE {table} SET {_DAMAGE[column]}")
    return str(path)


@pytest.mark.parametrize("column", sorted(_DAMAGE))
@pytest.mark.parametrize("command", [["events", "o", "--json"], ["query", "t", "--json"]])
def test_a_stored_event_that_is_not_json_is_one_line_naming_it(
    runner: CliRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    column: str,
    command: list[str],
) -> None:
    monkeypatch.setenv("ORDO_EVENTUAL_CONSISTENCY_DELAY_MS", "0")
    journal = _damaged_journal(tmp_path, runner, column)
    code, _, err = run(runner, *command, "--journal", journal)
    assert (code, err.count("\n")) == (1, 1), err
    assert err.startswith(
        f"Error: StorageIntegrityError: the stored {column} of event 1 of persistence id 'o' "
        "is not JSON: Expecting property name enclosed in double quotes"
    )


@pytest.mark.parametrize("command", [["reconcile", "tags", "o"], ["cleanup", "delete", "o"]])
def test_damaged_tags_are_named_by_the_commands_that_list_an_ids_tags(
    runner: CliRunner, tmp_path: Path, command: list[str]
) -> None:
    """A cleanup names them before it deletes anything."""
    journal = _damaged_journal(tmp_path, runner, "tags")
    before = Path(journal).read_bytes()
    code, _, err = run(runner, *command, "--journal", journal)
    assert (code, err.count("\n")) == (1, 1), err
    assert err.startswith(
        "Error: StorageIntegrityError: the stored tags of event 1 of persistence id 'o' "
        "is not JSON: "
    )
    assert Path(journal).read_bytes() == before


def test_the_library_names_the_damaged_event_and_keeps_jsons_error(
    runner: CliRunner, tmp_path: Path
) -> None:
    with open_journal(_damaged_journal(tmp_path, runner, "payload")) as journal:
        (event,) = journal.replay("o")
        with pytest.raises(StorageIntegrityError, match="payload of event 1 of") as caught:
            _ = event.payload
    assert isinstance(caught.value.__cause__, ValueError)
