"""ordo pipeline run: projections it runs, and journals, sinks and handlers it refuses."""

from __future__ import annotations

import re
import sqlite3
import time
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from checkpoint_support import journal_id_of
from cli_support import pipeline_file as _pipeline_file
from cli_support import run as _run
from ordo import BucketSize, EventsByTagSettings, NewEvent, open_journal
from ordo.time import TimeUUID, format_first_time_bucket
from sqlite_support import LATEST, fingerprint, newer_journal, older_journal, stored_version

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


_FIRST = format_first_time_bucket(time.time_ns() // 10**6 - 3_600_000)
"""The first time bucket of these tests' journals and pipelines, an hour before they start."""


def _orders(path: Path, events: int) -> str:
    """A new SQLite journal at `path` with `events` events of three orders, tagged `order`,
    and the table count_order_events writes; its URL."""
    url = f"sqlite:///{path}"
    settings = EventsByTagSettings(first_time_bucket=_FIRST, flush_interval=timedelta(0))
    with open_journal(url, settings=settings) as journal:
        for i in range(events):
            journal.append(f"order-{i % 3}", [NewEvent.of(i, tags=["order"])])
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(
            "CREATE TABLE order_totals (pid TEXT PRIMARY KEY, events BIGINT NOT NULL, "
            "last_nr BIGINT NOT NULL, misordered BIGINT NOT NULL)"
        )
    return url


def _orders_pipeline(
    tmp_path: Path, url: str, *, tag: str = "order", processor: str = "totals"
) -> Path:
    """pipeline.toml, projecting `url`'s `tag` with count_order_events into its checkpoint."""
    config = tmp_path / "pipeline.toml"
    config.write_text(
        f'[pipeline]\njournal = "{url}"\ntag = "{tag}"\nprocessor = "{processor}"\n'
        'handler = "ordo.spark.demo:count_order_events"\n'
        f'checkpoint = "{tmp_path / "checkpoint"}"\nsegments = 2\n'
        f'[source]\nfirstTimeBucket = "{_FIRST}"\neventualConsistencyDelayMs = 0\n',
        encoding="utf-8",
    )
    return config


@pytest.mark.spark
def test_a_pipeline_file_runs_a_projection(
    runner: CliRunner, tmp_path: Path, spark: SparkSession
) -> None:
    path = tmp_path / "shop.db"
    config = _orders_pipeline(tmp_path, _orders(path, 30))
    code, out, err = _run(runner, "pipeline", "run", str(config), "--master", "local[2]")
    assert code == 0, err
    assert "stopped" in out
    batches = re.findall(r"^pipeline 'totals': batch \d+, (\d+) rows in [\d.]+ s$", err, re.M)
    assert sum(int(rows) for rows in batches) == 30
    with closing(sqlite3.connect(path)) as conn:
        totals = conn.execute("SELECT pid, events, misordered FROM order_totals").fetchall()
    assert sorted(totals) == [(f"order-{p}", 10, 0) for p in range(3)]


@pytest.mark.spark
@pytest.mark.parametrize(
    ("changed", "problem"),
    [
        (  # offsets named no journal: it resumed there, skipping the other journal's events
            {"journal": "other"},
            "a query of journal='{ours}', this query's journal is '{theirs}' (the id of "
            "sqlite:///{other})",
        ),  # these two were refused only once Spark had started
        ({"tag": "payment"}, "a query of tag='order', this query's tag is 'payment'"),
        ({"processor": "tallies"}, "query of processor='totals', this query's processor is 'tal"),
    ],
)
def test_a_checkpoint_of_another_pipeline_is_one_error_line_before_spark_starts(
    runner: CliRunner,
    tmp_path: Path,
    spark: SparkSession,
    changed: dict[str, str],
    problem: str,
) -> None:
    other = tmp_path / "other.db"
    _orders(other, 3)  # older than every event of the journal the checkpoint is of
    url = _orders(tmp_path / "shop.db", 6)
    assert _run(runner, "pipeline", "run", str(_orders_pipeline(tmp_path, url)))[0] == 0
    checkpoint = tmp_path / "checkpoint"
    offsets = sorted(path.name for path in (checkpoint / "offsets").iterdir())
    journal = f"sqlite:///{other}" if "journal" in changed else url
    settings = {key: value for key, value in changed.items() if key != "journal"}
    config = _orders_pipeline(tmp_path, journal, **settings)

    code, out, err = _run(runner, "pipeline", "run", str(config))

    assert (code, out) == (1, "")
    assert err.startswith("Error: CheckpointMismatchError: the checkpoint was written by ")
    assert err.count("\n") == 1  # no "starting Spark" line: the check came first
    ours, theirs = journal_id_of(tmp_path / "shop.db"), journal_id_of(other)
    assert problem.format(other=other, ours=ours, theirs=theirs) in err
    assert sorted(path.name for path in (checkpoint / "offsets").iterdir()) == offsets
    with closing(sqlite3.connect(other)) as conn:
        assert conn.execute("SELECT count(*) FROM order_totals").fetchone() == (0,)


@pytest.mark.spark
def test_a_pipeline_reads_with_the_ordo_variables_of_its_command(
    runner: CliRunner, tmp_path: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A minute-bucket journal needed [source] bucketSize although ORDO_BUCKET_SIZE was set.

    Spark's session here was started before the variables were set, as a cluster's executors
    do not have them: the command gives the source what it resolved.
    """
    from ordo.spark.demo import ORDER_TOTALS_TABLE

    path = tmp_path / "shop.db"
    url = f"sqlite:///{path}"
    first = format_first_time_bucket(time.time_ns() // 10**6 - 600_000)
    settings = EventsByTagSettings(
        bucket_size=BucketSize.MINUTE, first_time_bucket=first, flush_interval=timedelta(0)
    )
    with open_journal(url, settings=settings) as journal:
        for i in range(12):
            journal.append(f"order-{i % 3}", [NewEvent.of(i, tags=["order"])])
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(ORDER_TOTALS_TABLE)
    config = tmp_path / "pipeline.toml"
    config.write_text(
        f'[pipeline]\njournal = "{url}"\ntag = "order"\nprocessor = "totals"\n'
        'handler = "ordo.spark.demo:count_order_events"\n'
        f'checkpoint = "{tmp_path / "checkpoint"}"\n'
        "[source]\neventualConsistencyDelayMs = 0\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("ORDO_BUCKET_SIZE", "minute")
    monkeypatch.setenv("ORDO_FIRST_TIME_BUCKET", first)
    code, _, err = _run(runner, "pipeline", "run", str(config), "--master", "local[2]")
    assert code == 0, err
    with closing(sqlite3.connect(path)) as conn:
        totals = conn.execute("SELECT pid, events FROM order_totals").fetchall()
    assert sorted(totals) == [(f"order-{p}", 4) for p in range(3)]


@pytest.mark.spark
def test_a_failing_pipeline_is_one_error_line_naming_the_handlers_exception(
    runner: CliRunner, tmp_path: Path, spark: SparkSession
) -> None:
    url = f"sqlite:///{tmp_path}/shop.db"
    first = format_first_time_bucket(time.time_ns() // 10**6 - 3_600_000)
    settings = EventsByTagSettings(first_time_bucket=first, flush_interval=timedelta(0))
    with open_journal(url, settings=settings) as journal:
        journal.append("order-1", [NewEvent.of(1, tags=["order"])])
    config = tmp_path / "pipeline.toml"
    config.write_text(  # the demo's handler, but the sink has no order_totals table
        f'[pipeline]\njournal = "{url}"\ntag = "order"\nprocessor = "totals"\n'
        'handler = "ordo.spark.demo:count_order_events"\n'
        f'checkpoint = "{tmp_path / "checkpoint"}"\n'
        f'[source]\nfirstTimeBucket = "{first}"\neventualConsistencyDelayMs = 0\n',
        encoding="utf-8",
    )
    code, _, err = _run(runner, "pipeline", "run", str(config))
    assert code == 1
    assert err == (
        "Error: QueryFailedError: pipeline 'totals' failed: "
        "StorageError: SQLite error: no such table: order_totals\n"
    )


@pytest.mark.spark
def test_spark_refusing_to_start_a_pipeline_is_one_error_line(
    runner: CliRunner, tmp_path: Path, spark: SparkSession
) -> None:
    """A checkpoint URI of a file system Spark does not know: refused by Spark as it starts."""
    config = _pipeline_file(tmp_path, "", checkpoint="bogus://nowhere/checkpoint")
    code, _, err = _run(runner, "pipeline", "run", str(config))
    assert code == 1
    assert err == (
        "Error: QueryFailedError: pipeline 'totals' failed: "
        'UnsupportedFileSystemException: No FileSystem for scheme "bogus"\n'
    )


@pytest.mark.parametrize(
    ("source", "function", "problem"),
    [
        (  # a script's argument parsing, say: the command ended with status 3 and no word
            "import sys\nsys.exit(3)\n",
            "handle",
            "cannot import handler '{module}:handle': SystemExit: 3",
        ),
        (  # with dead_letters, every event went to the dead letters and the run succeeded
            "def handle(event):\n    pass\n",
            "handle",
            "handler '{module}:handle' cannot be called with (event, context): too many ",
        ),
        (
            "class Handle:\n    pass\n",
            "Handle",
            "handler '{module}:Handle' cannot be called with (event, context): too many ",
        ),
        (
            "def handle(event, context, sink):\n    pass\n",
            "handle",
            "cannot be called with (event, context): missing a required argument: 'sink'",
        ),
        (  # each event's call made a coroutine nothing awaited: the run applied every event
            "async def handle(event, context):\n    pass\n",
            "handle",
            "handler '{module}:handle' is a coroutine function: each call would return a "
            "coroutine that nothing awaits, handling nothing",
        ),
        (
            "def handle(event, context):\n    yield event\n",
            "handle",
            "handler '{module}:handle' is a generator function: each call would return a "
            "generator that nothing iterates",
        ),
    ],
)
def test_a_handler_that_cannot_handle_events_is_one_error_line_before_spark_starts(
    runner: CliRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    source: str,
    function: str,
    problem: str,
) -> None:
    module = re.sub(r"\W", "_", tmp_path.name)  # its own name: imported modules are kept
    (tmp_path / f"{module}.py").write_text(source, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = _pipeline_file(tmp_path, "dead_letters = true\n")
    text = config.read_text(encoding="utf-8")
    config.write_text(
        text.replace("ordo.spark.demo:count_order_events", f"{module}:{function}"), encoding="utf-8"
    )
    code, _, err = _run(runner, "pipeline", "run", str(config))
    assert code == 1
    assert err.startswith("Error: ConfigurationError: ")
    assert err.count("\n") == 1
    assert problem.format(module=module) in err
    assert not (tmp_path / "checkpoint").exists()


def test_a_sink_ordo_cannot_open_is_one_error_line_before_spark_starts(
    runner: CliRunner, tmp_path: Path
) -> None:
    """A folder, a file that is not SQLite, an unreachable server: the query failed once Spark
    had started, and left a checkpoint. The first two are no outage (StorageAccessError)."""
    folder = tmp_path / "folder"
    folder.mkdir()
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n", encoding="utf-8")
    for sink, error, problem in [
        (
            f"sqlite:///{folder}",
            "StorageAccessError",
            f"cannot open SQLite journal {folder}: unable to open database",
        ),
        (
            str(text),
            "StorageAccessError",
            f"cannot open SQLite journal {text}: file is not a database",
        ),
        (
            "postgresql://nobody@127.0.0.1:1/shop",
            "StorageUnavailableError",
            "cannot connect to PostgreSQL at 127.0.0.1:1/shop",
        ),
    ]:
        config = _pipeline_file(tmp_path, f'sink = "{sink}"\n')
        code, _, err = _run(runner, "pipeline", "run", str(config))
        assert code == 1
        assert err.startswith(f"Error: {error}: {config}: [pipeline] sink: {problem}")
        assert err.count("\n") == 1
        assert not (tmp_path / "checkpoint").exists()
    assert text.read_text(encoding="utf-8") == "not a database\n"
    assert list(folder.iterdir()) == []


def test_a_sink_of_a_newer_ordo_is_one_error_line_before_spark_starts(
    runner: CliRunner, tmp_path: Path
) -> None:
    """The check only read the schema version: the projection failed on it once Spark ran."""
    sink = newer_journal(tmp_path / "sink.db")
    before = fingerprint(sink)
    config = _pipeline_file(tmp_path, f'sink = "sqlite:///{sink}"\n')
    code, _, err = _run(runner, "pipeline", "run", str(config))
    assert code == 1
    assert err == (
        f"Error: StorageUnavailableError: {config}: [pipeline] sink: journal schema version "
        f"{LATEST + 1} is newer than this ordo supports ({LATEST}); upgrade ordo\n"
    )
    assert fingerprint(sink) == before
    assert not (tmp_path / "checkpoint").exists()


def test_a_sink_of_an_older_ordo_passes_the_check_unchanged(tmp_path: Path) -> None:
    """The projection upgrades it once it runs; the check does not."""
    from ordo.spark.pipeline import PipelineConfig

    sink = tmp_path / "old.db"
    older_journal(sink)
    before = fingerprint(sink)
    PipelineConfig.from_toml(_pipeline_file(tmp_path, f'sink = "sqlite:///{sink}"\n'))
    assert fingerprint(sink) == before


def test_a_sink_of_an_application_is_only_read_by_the_check(tmp_path: Path) -> None:
    """An existing database, ordo's tables or not, is a sink: read, not changed, by the check."""
    from ordo.spark.pipeline import PipelineConfig

    app = tmp_path / "app.db"
    with closing(sqlite3.connect(app)) as conn, conn:
        conn.execute("CREATE TABLE totals (pid TEXT PRIMARY KEY)")
    before = fingerprint(app)
    config = PipelineConfig.from_toml(_pipeline_file(tmp_path, f'sink = "sqlite:///{app}"\n'))
    assert config.sink == f"sqlite:///{app}"
    assert fingerprint(app) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db", "pipeline.toml", "shop.db"]


def test_a_pipeline_takes_its_claim_timeout_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ORDO_CLAIM_TIMEOUT_MS was ignored: the projection took a claim for expired after 10 s."""
    from ordo.spark.pipeline import PipelineConfig, projection_spec

    monkeypatch.setenv("ORDO_CLAIM_TIMEOUT_MS", "60000")
    spec = projection_spec(PipelineConfig.from_toml(_pipeline_file(tmp_path, "")))
    assert spec.claim_timeout == timedelta(minutes=1)


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("0", "ORDO_CLAIM_TIMEOUT_MS: claim_timeout must be a duration > 0, got 0 ms"),
        (
            "soon",
            "ORDO_CLAIM_TIMEOUT_MS: 'soon' is not a whole number of milliseconds "
            "(plain digits 0-9, with a leading - for a negative number)",
        ),
    ],
)
def test_a_bad_claim_timeout_variable_is_one_error_line_before_spark_starts(
    runner: CliRunner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    value: str,
    needle: str,
) -> None:
    config = _pipeline_file(tmp_path, "")
    monkeypatch.setenv("ORDO_CLAIM_TIMEOUT_MS", value)
    code, _, err = _run(runner, "pipeline", "run", str(config))
    assert code == 1
    assert err == f"Error: ConfigurationError: {needle}\n"
    assert not (tmp_path / "checkpoint").exists()


def test_a_pipeline_asking_another_bucket_size_than_the_journals_fails_before_spark_starts(
    runner: CliRunner, tmp_path: Path
) -> None:
    config = _pipeline_file(tmp_path, '[source]\nbucketSize = "day"\n')
    with open_journal(f"sqlite:///{tmp_path / 'shop.db'}") as journal:  # hourly buckets
        journal.append("order-1", [NewEvent.of(1, tags=["order"])])
    code, _, err = _run(runner, "pipeline", "run", str(config))
    assert code == 1
    assert err == (
        "Error: BucketSizeMismatchError: journal records bucket_size=hour, cannot open "
        "it with bucket_size=day (the bucket size recorded by `ordo init` or the first write "
        "never changes); "
        "set the option bucketSize (or ORDO_BUCKET_SIZE) to hour\n"
    )
    assert not (tmp_path / "checkpoint").exists()


def test_a_pipeline_of_an_older_journal_leaves_it_as_it_is(
    runner: CliRunner, tmp_path: Path
) -> None:
    """The source only reads: an older schema is refused, not upgraded, before Spark starts."""
    journal = tmp_path / "old.db"
    older_journal(journal)
    before = fingerprint(journal)
    config = _pipeline_file(tmp_path, "")
    text = config.read_text(encoding="utf-8").replace(str(tmp_path / "shop.db"), str(journal))
    config.write_text(text, encoding="utf-8")
    code, _, err = _run(runner, "pipeline", "run", str(config))
    assert code == 1
    assert err.startswith(f"Error: SchemaVersionError: journal schema version {LATEST - 1} is ")
    assert err.count("\n") == 1
    assert fingerprint(journal) == before
    assert stored_version(journal) == LATEST - 1
    assert not (tmp_path / "checkpoint").exists()


def test_a_pipeline_starting_after_a_future_offset_fails_before_spark_starts(
    runner: CliRunner, tmp_path: Path
) -> None:
    """It failed once Spark had started, leaving a checkpoint, naming a back-tracked offset."""
    future = TimeUUID.min_for_epoch_ns(time.time_ns() + 365 * 24 * 3600 * 10**9)
    config = _pipeline_file(tmp_path, f'[source]\nstartingOffsets = "{future}"\n')
    code, _, err = _run(runner, "pipeline", "run", str(config))
    assert code == 1
    assert err.startswith(f"Error: FutureOffsetError: option startingOffsets: offset {future} (")
    assert err.count("\n") == 1  # no "starting Spark" line
    assert not (tmp_path / "checkpoint").exists()
