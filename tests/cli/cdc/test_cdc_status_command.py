"""`ordo status` and `ordo cdc status`: the journal, processors, change logs (their recorded
partition count) and wal2json slots they show, and a named change log that is not there.
"""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from cdc_cli_support import capture_orders, one_line_error, readings, registered, run_ordo
from ordo.cdc import Publisher
from ordo.cli.root import cli
from ordo.storage.change_sources import change_source_at
from ordo.storage.open import stores_at
from ordo.storage.parquet import ParquetChangeLog
from ordo.storage.postgres.change_source import PostgresChangeSource
from postgres_source_support import fresh_slot


@pytest.mark.parametrize("command", [("cdc", "status"), ("status",)])
def test_status_refuses_a_named_change_log_that_is_not_there(
    tmp_path: Path, journal: str, command: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A misspelt --change-log would show "no change logs", as if nothing had been captured."""
    assert run_ordo("init", "--journal", journal)[0] == 0
    monkeypatch.chdir(tmp_path)  # the default, .ordo/changelog, does not exist: no capture yet
    code, out, err = run_ordo(*command, "--journal", journal, "--json")
    assert code == 0, err
    document = json.loads(out)
    assert (document if command[0] == "cdc" else document["cdc"])["change_logs"] == []
    misspelt = tmp_path / "nonexist" / "x"
    code, _, err = run_ordo(*command, "--journal", journal, "--change-log", str(misspelt), "--json")
    one_line_error(
        code, err, f"ConfigurationError: no change log directory {misspelt}: check --change-log"
    )
    monkeypatch.setenv("ORDO_CDC_CHANGE_LOG", str(misspelt))
    code, _, err = run_ordo(*command, "--journal", journal)
    one_line_error(code, err, f"no change log directory {misspelt}: check ORDO_CDC_CHANGE_LOG")
    assert not misspelt.parent.exists()


def test_status_shows_the_journal_processors_and_cdc(journal: str, tmp_path: Path) -> None:
    lines = "\n".join(
        json.dumps({"persistence_id": f"order-{i}", "payload": {"n": i}, "tags": ["order"]})
        for i in range(7)
    )
    assert run_ordo("append", "--journal", journal, stdin=lines)[0] == 0
    with stores_at(journal) as stores:
        stores.tokens.initialize("order-view", segment_count=2)
    (tmp_path / "log").mkdir()  # a named change log directory must exist
    code, out, err = run_ordo(
        "status", "--journal", journal, "--change-log", str(tmp_path / "log"), "--json"
    )
    assert code == 0, err
    document = json.loads(out)
    assert document["journal"]["events"] == 7
    assert document["journal"]["persistence_ids"] == 7
    assert document["journal"]["tags"] == {"order": 7}
    assert document["journal"]["time_buckets"] == 1
    assert document["journal"]["events_per_s"] > 0  # appended within the last minute
    (processor,) = document["processors"]
    assert processor["processor"] == "order-view"
    assert len(processor["segments"]) == 2
    assert (processor["lag_events"], processor["lag_ms"]) == (7, None)  # nothing processed yet
    assert document["cdc"]["change_logs"] == []
    assert document["cdc"]["sources"] == []  # SQLite keeps change tables in each source file
    code, out, _ = run_ordo("status", "--journal", journal)
    assert code == 0
    assert "persistence ids" in out


def test_status_shows_the_journal_id_that_info_shows(journal: str, tmp_path: Path) -> None:
    """`ordo info` showed it and status did not: which journal a status is of was not said."""
    assert run_ordo("init", "--journal", journal)[0] == 0
    journal_id = json.loads(run_ordo("info", "--journal", journal, "--json")[1])["journal_id"]
    assert journal_id
    (tmp_path / "log").mkdir()
    args = ("status", "--journal", journal, "--change-log", str(tmp_path / "log"))
    code, out, err = run_ordo(*args, "--json")
    assert code == 0, err
    assert json.loads(out)["journal"]["journal_id"] == journal_id
    code, out, err = run_ordo(*args)
    assert code == 0, err
    assert any(
        line.split() == ["│", "journal", "id", "│", journal_id, "│"] for line in out.splitlines()
    )


@pytest.mark.postgres
def test_status_lists_the_wal2json_slots_of_a_postgres_journal(
    postgres_dsn: str, tmp_path: Path
) -> None:
    slot = fresh_slot()
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id BIGINT PRIMARY KEY, qty BIGINT)")
    try:
        with change_source_at(postgres_dsn, ["items"], slot=slot):
            pass
        assert run_ordo("init", "--journal", postgres_dsn)[0] == 0  # as `ordo cdc capture` does
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute("INSERT INTO items VALUES (1, 2)")
        args = ("status", "--journal", postgres_dsn, "--change-log", str(tmp_path), "--json")
        code, out, err = run_ordo(*args)
        assert code == 0, err
        (found,) = [s for s in json.loads(out)["cdc"]["sources"] if s["name"] == slot]
        assert found["retained_bytes"] > 0
        assert found["lag"] >= 0
    finally:
        with PostgresChangeSource(postgres_dsn, slot=slot, tables=["items"]) as source:
            source.drop()


def test_status_shows_a_change_logs_recorded_partition_count(tmp_path: Path, journal: str) -> None:
    """It counted partition directories: a log of 8 partitions whose one key filled one was
    shown with 1 partition, which is not the `--partitions` a publish must use."""
    ingest = registered(tmp_path, journal)
    given = tmp_path / "readings.jsonl"
    given.write_text(readings() + "\n")
    assert run_ordo(*ingest, str(given))[0] == 0
    status = ("cdc", "status", "--journal", journal, "--change-log", str(tmp_path / "log"))

    code, out, err = run_ordo(*status, "--json")

    assert code == 0, err
    (log,) = json.loads(out)["change_logs"]
    assert log["partitions"] == 8
    assert (log["has_partition_record"], log["files"]) == (True, 1)
    assert "1 mutation in 1 file, 8 partitions; last seg@1" in _wide(*status)
    (tmp_path / "log" / "readings" / "_partitions.json").unlink()  # as an earlier ordo wrote it

    code, out, err = run_ordo(*status, "--json")

    assert code == 0, err
    (log,) = json.loads(out)["change_logs"]
    assert (log["partitions"], log["has_partition_record"]) == (1, False)
    assert "1 partition with files (no count recorded); last" in _wide(*status)


def test_status_quotes_a_segment_holding_the_punctuation_of_its_positions(
    tmp_path: Path, journal: str
) -> None:
    """`last a@1, b@2` was segment `a@1, b` at 2, or segments `a` at 1 and `b` at 2: a segment
    with `@` or `,` is quoted there, as `events` quotes a tag holding its tag list's `#` or
    `,`; one holding a space only is not."""
    ingest = registered(tmp_path, journal)
    given = tmp_path / "readings.jsonl"
    lines = [readings(segment="a@1, b", position=2), readings(segment="c d", position=3)]
    given.write_text("\n".join(lines) + "\n")
    assert run_ordo(*ingest, str(given))[0] == 0
    status = ("cdc", "status", "--journal", journal, "--change-log", str(tmp_path / "log"))
    assert "; last 'a@1, b'@2, c d@3 " in _wide(*status)


@pytest.mark.postgres
@pytest.mark.parametrize("earlier", [False, True], ids=["new-log", "log-of-an-earlier-ordo"])
def test_a_postgres_capture_is_shown_under_the_segment_of_its_change_log_positions(
    postgres_dsn: str, tmp_path: Path, earlier: bool
) -> None:
    """A capture publishes under `<slot>.<system identifier>`, or under `<slot>` into a log an
    earlier ordo published into from the server, and the change log's last positions are keyed
    by that segment: the status named the capture by its slot alone, which matched none of
    them. The slot is still `name` in the JSON, and named in the row's state."""
    slot, log = fresh_slot(), tmp_path / "log"
    assert run_ordo("init", "--journal", postgres_dsn)[0] == 0
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, qty BIGINT)")
        row = conn.execute("SELECT system_identifier FROM pg_control_system()").fetchone()
    assert row is not None
    identifier = str(row[0])
    try:
        with PostgresChangeSource(postgres_dsn, slot=slot, tables=["orders"]) as source:
            source.create()
            with psycopg.connect(postgres_dsn, autocommit=True) as conn:
                conn.execute("SET synchronous_commit = on")  # decoding sees it at once
                conn.execute("INSERT INTO orders VALUES (1, 2)")
            if earlier:  # as an earlier ordo published, under the slot's name
                rows = source.peek(max_changes=10).rows
                rows = rows.replaced("segment", [slot] * len(rows.column("segment")))
                assert Publisher(ParquetChangeLog(log)).publish_rows(rows).published == {
                    "orders": 1
                }
        if not earlier:
            capture_orders(log, postgres_dsn, postgres_dsn, "--slot", slot)
        segment = slot if earlier else f"{slot}.{identifier}"
        listed = ("cdc", "status", "--journal", postgres_dsn, "--change-log", str(log))
        named = (*listed, "--source", postgres_dsn, "--table", "orders", "--slot", slot)
        for status in (listed, named):
            code, out, err = run_ordo(*status, "--json")

            assert code == 0, err
            document = json.loads(out)
            (positions,) = [logged["last_positions"] for logged in document["change_logs"]]
            (found,) = [s for s in document["sources"] if s["name"] == slot]
            assert (found["segment"], found["slot"], list(positions)) == (segment, slot, [segment])
            (shown,) = [line for line in _wide(*status).splitlines() if "capture" in line]
            assert shown.split()[1:5] == ["capture", "│", segment, "│"]
            assert f"slot {slot}, confirmed" in shown
    finally:
        with PostgresChangeSource(postgres_dsn, slot=slot, tables=["orders"]) as source:
            source.drop()


def _wide(*args: str) -> str:
    """The output of a command that succeeds, its tables as wide as their rows (no wrapping)."""
    result = CliRunner().invoke(cli, list(args), env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.stderr
    return result.stdout
