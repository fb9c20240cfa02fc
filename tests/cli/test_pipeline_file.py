"""Pipeline files: the keys, values, triggers and checkpoints they take or refuse."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cli_support import pipeline_file as _pipeline_file
from cli_support import run as _run
from ordo import init_storage
from permission_support import locked_out


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[pipeline]\ncolour = 1\n", "[pipeline] has unknown key 'colour' (valid keys: journal, "),
        (
            'colour = 1\n[pipeline]\njournal = "x.db"\n',
            "has unknown table 'colour' (valid tables: ",
        ),
        (
            '[pipeline]\njournal = "x.db"\ntag = "t"\nprocessor = ""\n'
            'handler = "ordo.spark.demo:count_order_events"\ncheckpoint = "c"\n',
            "[pipeline] processor must be a non-empty string, got ''",
        ),
        ('[pipeline]\njournal = "x.db"\n', "needs tag, processor, handler, checkpoint"),
        (
            f'[pipeline]\njournal = "x.db"\ntag = "t"\nprocessor = "{"p" * 256}"\n'
            'handler = "ordo.spark.demo:count_order_events"\ncheckpoint = "c"\n',
            "[pipeline] processor: processor name is 256 characters long, at most 255 allowed",
        ),
        (
            '[pipeline]\njournal = "x.db"\ntag = "t"\nprocessor = "p"\n'
            'handler = "no.such.module:f"\ncheckpoint = "c"\n',
            "cannot import handler",
        ),
        (
            '[pipeline]\njournal = "sqlite:///no/such.db"\ntag = "t"\nprocessor = "p"\n'
            'handler = "ordo.spark.demo:count_order_events"\ncheckpoint = "c"\n',
            "StorageUnavailableError: no journal at no/such.db",
        ),
    ],
)
def test_a_bad_pipeline_file_is_one_error_line(
    runner: CliRunner, tmp_path: Path, text: str, needle: str
) -> None:
    config = tmp_path / "pipeline.toml"
    config.write_text(text, encoding="utf-8")
    code, _, err = _run(runner, "pipeline", "run", str(config))
    assert code == 1
    assert needle in err


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ('dead_letters = "false"\n', "[pipeline] dead_letters must be a boolean (true or false)"),
        ("segments = 0\n", "[pipeline] segments must be in 1..1024, got 0"),
        ("segments = -2\n", "[pipeline] segments must be in 1..1024, got -2"),
        ("segments = 1025\n", "[pipeline] segments must be in 1..1024, got 1025"),
        ('segments = "abc"\n', "[pipeline] segments must be an integer, got 'abc'"),
        ("segments = 2.7\n", "[pipeline] segments must be an integer, got 2.7"),
        ("segments = true\n", "[pipeline] segments must be an integer, got True"),
        ("sink = 1\n", "[pipeline] sink must be a non-empty string, got 1"),
        ('sink = " "\n', "[pipeline] sink must be a non-empty string, got ' '"),
        ('sink = "mysql://db/shop"\n', "[pipeline] sink: unknown sink URL scheme 'mysql'"),
        (  # psycopg's ProgrammingError was a traceback
            'sink = "host=127.0.0.1 port"\n',
            'malformed PostgreSQL URL or conninfo: missing "=" after "port" in connection info',
        ),
        (  # deeper than tomllib reads: a RecursionError's traceback
            "colour = " + "[" * 100_000 + "]" * 100_000 + "\n",
            "pipeline.toml: maximum recursion depth exceeded",
        ),
        (  # more digits than Python converts: a ValueError's traceback
            "segments = 1" + "0" * 5_000 + "\n",
            "pipeline.toml: integer too long (more than 4,300 digits)",
        ),
        ('sink = "postgresql://[db/shop"\n', "[pipeline] sink: malformed sink URL: Invalid IPv6"),
        (
            'sink = "sqlite:///no/such/folder/sink.db"\n',
            "[pipeline] sink 'sqlite:///no/such/folder/sink.db': there is no folder no/such/folder",
        ),
        (
            "[source]\nmaxEventsPerTrigger = 0\n",
            "option maxEventsPerTrigger must be in 1..9007199254740991, got 0",
        ),
        ('trigger = "bogus"\n', "trigger must be 'available_now' or a processing time"),
        ('trigger = "1 month"\n', "trigger must be 'available_now' or a processing time"),
        ('trigger = "1.5 minutes"\n', "trigger must be 'available_now' or a processing time"),
        (  # Spark's interval parser overflowed once it had started
            'trigger = "15250285 weeks"\n',
            "trigger '15250285 weeks' in milliseconds is too large: at most 9007199254740991",
        ),
        (
            'trigger = "1 day 9007199254740 seconds"\n',
            "in milliseconds is too large: at most 9007199254740991 (2**53 - 1), got 90071993411",
        ),
        (
            "[source]\nbogusOption = 1\n",
            "ordo_events_by_tag has unknown option 'bogusOption'; option names are case-insen",
        ),
        ('[source]\npageSize = "many"\n', "option pageSize must be an integer, got 'many'"),
        ("[source]\npageSize = 1.5\n", "[source] pageSize must be a string or an integer"),
        ("[source]\nSegments = 2\n", "[source] cannot set Segments: [pipeline] sets"),
        (
            "[sources]\neventualConsistencyDelayMs = 0\n",
            "has unknown table 'sources' (valid tables: pipeline, source)",
        ),
    ],
)
def test_a_bad_pipeline_value_is_one_error_line_before_spark_starts(
    runner: CliRunner, tmp_path: Path, extra: str, needle: str
) -> None:
    config = _pipeline_file(tmp_path, extra)
    code, _, err = _run(runner, "pipeline", "run", str(config))
    assert code == 1
    assert err.startswith("Error: ConfigurationError: ")
    assert err.count("\n") == 1  # no "starting Spark" line: the check came first
    assert needle in err
    assert not (tmp_path / "checkpoint").exists()


@pytest.mark.parametrize("sink", [":memory:", "sqlite:///:memory:"])
def test_an_in_memory_sink_is_refused_before_spark_starts(
    runner: CliRunner, tmp_path: Path, sink: str
) -> None:
    """Its check took `:memory:` for a new file in the working directory: Spark started, and
    the query failed on opening it, leaving the checkpoint folder behind."""
    config = _pipeline_file(tmp_path, f'sink = "{sink}"\n')
    code, out, err = _run(runner, "pipeline", "run", str(config))
    assert (code, out) == (1, "")
    assert err == (
        f"Error: StorageAccessError: {config}: [pipeline] sink: cannot open SQLite sink "
        ":memory:: an in-memory database cannot be a journal (it cannot be in WAL mode)\n"
    )
    assert not (tmp_path / "checkpoint").exists()


@pytest.mark.parametrize("sink", ["notes/sink.db", "notes/deeper/sink.db"])
def test_a_sink_under_a_file_names_the_file_before_spark_starts(
    runner: CliRunner, tmp_path: Path, sink: str
) -> None:
    """It said "there is no folder notes", sending the user to make one where a file is."""
    (tmp_path / "notes").write_text("not a folder", encoding="utf-8")
    config = _pipeline_file(tmp_path, f'sink = "sqlite:///{tmp_path / sink}"\n')
    code, out, err = _run(runner, "pipeline", "run", str(config))
    assert (code, out) == (1, "")
    assert err == (
        f"Error: ConfigurationError: {config}: [pipeline] sink 'sqlite:///{tmp_path / sink}': "
        f"{tmp_path / 'notes'} is a file, not a folder\n"
    )
    assert (tmp_path / "notes").read_text(encoding="utf-8") == "not a folder"
    assert not (tmp_path / "checkpoint").exists()


def test_a_folder_beside_the_sink_is_a_refusal_before_spark_starts(
    runner: CliRunner, tmp_path: Path
) -> None:
    """The sink's check made every StorageError a StorageUnavailableError, an outage: a folder
    where SQLite keeps a file beside the sink (StorageAccessError) lost what it was."""
    sink = tmp_path / "sink.db"
    init_storage(str(sink))
    before = sink.read_bytes()
    Path(f"{sink}-wal").mkdir()
    config = _pipeline_file(tmp_path, f'sink = "sqlite:///{sink}"\n')
    code, out, err = _run(runner, "pipeline", "run", str(config))
    assert (code, out) == (1, "")
    assert err == (
        f"Error: StorageAccessError: {config}: [pipeline] sink: cannot open SQLite journal "
        f"{sink}: {sink}-wal is a folder, not the -wal file SQLite keeps beside it\n"
    )
    assert sink.read_bytes() == before
    assert not (tmp_path / "checkpoint").exists()


@pytest.mark.parametrize(
    "checkpoint",
    [
        "{file}/checkpoint",
        "file://{file}/checkpoint",
        "{file}",
        "{file.parent}/missing/../{file.name}/checkpoint",  # Spark takes .. away by the name
        "file://{file.parent}/missing/../{file.name}/checkpoint",
    ],
)
def test_a_checkpoint_spark_cannot_create_is_one_error_line_before_spark_starts(
    runner: CliRunner, tmp_path: Path, checkpoint: str
) -> None:
    """Spark found out only once it had started, in a Java stack trace of a hundred lines."""
    file = tmp_path / "handlers.py"
    file.write_text("def count(event, context):\n    pass\n", encoding="utf-8")
    given = checkpoint.format(file=file)
    config = _pipeline_file(tmp_path, "", checkpoint=given)
    code, _, err = _run(runner, "pipeline", "run", str(config))
    assert code == 1
    assert err == (
        f"Error: ConfigurationError: {config}: [pipeline] checkpoint {given!r}: "
        f"{file} is not a folder\n"
    )
    assert file.is_file()


@pytest.mark.parametrize(
    ("checkpoint", "problem"),
    [
        ("file:checkpoint", "a file: URI needs an absolute path, as in file:///path"),
        ("file://host/tmp/checkpoint", "a file: URI takes no host ('host'), as in file:///path"),
        ("file://localhost/tmp/checkpoint", "a file: URI takes no host ('localhost'), as in "),
        ("check\\u0000point", "a path cannot hold a NUL character"),
        ("hdfs://[namenode/checkpoint", "Invalid IPv6 URL"),  # was urlsplit's traceback
    ],
)
def test_a_checkpoint_uri_spark_refuses_is_one_error_line_before_spark_starts(
    runner: CliRunner, tmp_path: Path, checkpoint: str, problem: str
) -> None:
    """Spark refused these only once it had started (URISyntaxException, Wrong FS, ...)."""
    config = _pipeline_file(tmp_path, "", checkpoint=checkpoint)
    code, _, err = _run(runner, "pipeline", "run", str(config))
    assert code == 1
    assert err.startswith(f"Error: ConfigurationError: {config}: [pipeline] checkpoint ")
    assert err.count("\n") == 1
    assert problem in err


def test_a_file_uri_checkpoint_is_checked_as_spark_reads_it(tmp_path: Path) -> None:
    """Spark does not percent-decode a file: URI's path: `h%2Epy` is a folder of that name.

    The check decoded it, and refused a checkpoint Spark would have created, next to a file.
    """
    from ordo.spark.pipeline import PipelineConfig

    (tmp_path / "h.py").write_text("", encoding="utf-8")
    checkpoint = f"file://{tmp_path}/h%2Epy/checkpoint"
    config = PipelineConfig.from_toml(_pipeline_file(tmp_path, "", checkpoint=checkpoint))
    assert config.checkpoint == checkpoint
    assert not (tmp_path / "h%2Epy").exists()


def test_a_binary_pipeline_file_is_one_error_line_naming_it(
    runner: CliRunner, tmp_path: Path
) -> None:
    config = tmp_path / "pipeline.toml"
    config.write_bytes(b"\xff\xfe[pipeline]\n")
    code, _, err = _run(runner, "pipeline", "run", str(config))
    assert code == 1
    assert err.startswith(f"Error: ConfigurationError: cannot read pipeline file {config}: ")
    assert err.count("\n") == 1


def test_a_pipeline_file_that_starts_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    """Some editors start UTF-8 files with one: it was 'Invalid statement (at line 1)'."""
    from ordo.spark.pipeline import PipelineConfig

    config = _pipeline_file(tmp_path, "")
    config.write_bytes("\ufeff".encode() + config.read_bytes())
    assert PipelineConfig.from_toml(config).tag == "order"


@pytest.mark.parametrize(
    ("trigger", "parsed"),
    [
        ("available-now", "available_now"),
        ("Available_Now", "available_now"),
        ("1 second", "1 second"),
        ("1.5 seconds", "1.5 seconds"),
        ("interval 1 minute 30 seconds", "interval 1 minute 30 seconds"),
        ("500 Milliseconds", "500 Milliseconds"),
        (" available_now ", "available_now"),  # as " 1 second " was taken
        ("14892195 weeks 1.5 seconds", "14892195 weeks 1.5 seconds"),  # under 2**53 ms
    ],
)
def test_a_pipeline_file_takes_the_triggers_spark_takes(
    tmp_path: Path, trigger: str, parsed: str
) -> None:
    from ordo.spark.pipeline import PipelineConfig

    config = PipelineConfig.from_toml(_pipeline_file(tmp_path, f'trigger = "{trigger}"\n'))
    assert config.trigger == parsed


def test_a_pipeline_files_defaults_and_source_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ordo.spark.pipeline import PipelineConfig

    monkeypatch.delenv("ORDO_BUCKET_SIZE", raising=False)
    monkeypatch.setenv("ORDO_FIRST_TIME_BUCKET", "20200101T00:00")
    extra = '[source]\neventualConsistencyDelayMs = 0\nstartingOffsets = "latest"\n'
    config = PipelineConfig.from_toml(_pipeline_file(tmp_path, extra))
    assert (config.sink, config.segments, config.dead_letters) == (config.journal, 1, False)
    assert config.source_options() == {
        "bucketSize": "hour",  # resolved from the environment by the command, for the source
        "firstTimeBucket": "20200101T00:00",
        "eventualConsistencyDelayMs": "0",
        "startingOffsets": "latest",
        "journal": config.journal,
        "tag": "order",
        "processor": "totals",
        "segments": "1",
    }


def test_a_checkpoint_whose_offsets_cannot_be_listed_is_one_error_line_before_spark_starts(
    runner: CliRunner, tmp_path: Path
) -> None:
    """The check of the checkpoint's newest offset ended with the bare PermissionError.

    `locked_out` (tests/permission_support.py): a folder's mode stops root there.
    """
    offsets = tmp_path / "checkpoint" / "offsets"
    offsets.mkdir(parents=True)
    config = _pipeline_file(tmp_path, "")
    code, _, err = locked_out(offsets, lambda: _run(runner, "pipeline", "run", str(config)))
    assert (code, err) == (
        1,
        f"Error: ConfigurationError: cannot list the offsets of checkpoint {offsets.parent}: "
        f"Permission denied: {offsets}\n",
    )
