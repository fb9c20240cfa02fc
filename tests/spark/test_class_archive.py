"""`ordo spark archive` makes Spark's class-data archive; the next start maps it, checked.

Whether a start maps the archive is read from the JVM's own class loading log
(`-Xlog:class+load`, given through `spark.driver.extraJavaOptions`, which start_session's
options must leave in force): a class from the archive is logged as from the "shared objects
file (top)", one from a jar as from the jar's file. Five Spark starts in all: the warm-up
that makes the archive, a start and a materializer's with it, and one start each with it cut
short and damaged within.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from ordo.cli.root import cli
from ordo.errors import ClassArchiveError
from ordo.spark.class_archive import (
    MARKED_EVERY_S,
    ClassArchive,
    archive_folder,
    driver_options,
    make_archive,
)
from spark_classes_support import JVM_OPTIONS

pytestmark = pytest.mark.spark

OPTIONS = JVM_OPTIONS
"""The run's JVM options without its own archive (tests/conftest.py): with one, SPARK_SUBMIT_OPTS
chooses class-data sharing itself, and ordo makes and maps none."""
_START = """
import os, sys
from ordo.spark import start_session

before = os.environ.get("SPARK_SUBMIT_OPTS")
spark = start_session(master="local[1]", app_name="class-archive-test", output=sys.argv[1])
print(spark.range(10).count(), os.environ.get("SPARK_SUBMIT_OPTS") == before)
"""
"""A start and a job in a process of its own (this one's JVM may be running); it prints the
job's count and whether SPARK_SUBMIT_OPTS is as it was before the start."""
_FROM_ARCHIVE = "org.apache.spark.SparkContext source: shared objects file (top)"
_FROM_JAR = "org.apache.spark.SparkContext source: file:"


def _environment(folder: Path, **more: str) -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_SUBMIT_OPTS": OPTIONS,
        "ORDO_SPARK_CLASS_ARCHIVE": str(folder),
        "ORDO_SPARK_LOG": str(folder.parent / f"{folder.name}-spark.log"),
        **more,
    }


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> ClassArchive:
    """The archive `ordo spark archive --json` made in a folder of its own."""
    folder = tmp_path_factory.mktemp("made") / "archives"
    ran = subprocess.run(
        [sys.executable, "-m", "ordo", "spark", "archive", "--json"],
        env=_environment(folder),
        capture_output=True,
        text=True,
        check=False,
        timeout=400,
    )
    assert ran.returncode == 0, ran.stderr
    assert f"making Spark's class archive in {folder}" in ran.stderr
    document = json.loads(ran.stdout)
    return ClassArchive(
        path=Path(document["archive"]), size_bytes=document["size_bytes"], is_new=document["made"]
    )


def _logging_classes(folder: Path, log: Path) -> dict[str, str]:
    """The environment of a start with archives in `folder` whose JVM logs its classes to `log`."""
    return _environment(
        folder,
        PYSPARK_SUBMIT_ARGS=(
            f"--conf spark.driver.extraJavaOptions=-Xlog:class+load:file={log} pyspark-shell"
        ),
    )


def _start(folder: Path, log: Path) -> str:
    """The class loading log of a start of Spark with archives in `folder`; the start must work."""
    ran = subprocess.run(
        [sys.executable, "-c", _START, str(log.with_suffix(".out"))],
        env=_logging_classes(folder, log),
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["10", "True"]
    return log.read_text()


def _age(path: Path, seconds: float) -> int:
    """Set `path`'s modification time (its mark of use) `seconds` back; that time in ns."""
    then = time.time_ns() - int(seconds * 1e9)
    os.utime(path, ns=(then, then))
    return then


@pytest.mark.timeout(600)
def test_the_next_start_maps_the_archive_the_command_made_and_marks_it_used(
    made: ClassArchive, tmp_path: Path
) -> None:
    """The start maps it though its mark of use is of another time, 40 days back: Java checks
    the class path's jars' times, not the archive file's, so marking it is safe."""
    assert made.is_new
    assert made.path.stat().st_size == made.size_bytes > 0
    assert made.path.name.endswith(f"-{made.size_bytes}.jsa")
    marked = _age(made.path, 40 * 86_400)
    assert _FROM_ARCHIVE in _start(made.path.parent, tmp_path / "classes.log")
    assert made.path.stat().st_mtime_ns > marked + 39 * 86_400 * 10**9
    again = subprocess.run(
        [sys.executable, "-m", "ordo", "spark", "archive"],
        env=_environment(made.path.parent),
        capture_output=True,
        text=True,
        check=True,
    )
    shown = ["archive", str(made.path), "size_bytes", str(made.size_bytes), "made", "false"]
    assert again.stdout.split() == shown


_STREAMING = (
    "org.apache.spark.sql.execution.streaming.runtime.FileStreamSource",
    "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "org.apache.spark.sql.execution.python.streaming.TransformWithStateInPySparkExec",
    "org.apache.spark.sql.execution.streaming.sources.ForeachBatchSink",
)
"""Classes of the materializer's stream: its source, state store, stateful step and sink."""


@pytest.mark.timeout(600)
def test_a_stream_loads_sparks_streaming_classes_from_the_archive(
    made: ClassArchive, tmp_path: Path
) -> None:
    """A real materializer (`ordo cdc simulate`) loads no class of Spark's streaming engine
    from a jar: the warm-up runs a stateful stream (some 540 of them came from the jars when it
    ran only batch jobs)."""
    log = tmp_path / "classes.log"
    ran = subprocess.run(
        [sys.executable, "-m", "ordo", "cdc", "simulate", "--keys", "5", "--mutations", "20"],
        env=_logging_classes(made.path.parent, log),
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
    )
    assert ran.returncode == 0, ran.stderr
    sources = dict(
        line.split("] ", 1)[1].split(" source: ", 1)
        for line in log.read_text().splitlines()
        if " source: " in line
    )
    assert [sources.get(name) for name in _STREAMING] == ["shared objects file (top)"] * 4
    from_jars = [
        name for name, source in sources.items() if ".streaming." in name and "file:" in source
    ]
    assert from_jars == []


def test_a_mark_of_use_is_renewed_at_most_once_a_day(made: ClassArchive) -> None:
    environ = {"SPARK_SUBMIT_OPTS": OPTIONS, "ORDO_SPARK_CLASS_ARCHIVE": str(made.path.parent)}
    marked = _age(made.path, MARKED_EVERY_S - 3600)
    assert driver_options(environ) is not None
    assert made.path.stat().st_mtime_ns == marked
    marked = _age(made.path, MARKED_EVERY_S + 3600)
    assert driver_options(environ) is not None
    assert made.path.stat().st_mtime_ns > marked + 3600 * 10**9


_OLD = "spark-classes-00000000000000bb-3.jsa"
_RECENT = "spark-classes-00000000000000cc-4.jsa"
_PARTIAL = "spark-classes-00000000000000dd.4242.partial"
_NOT_ORDOS = "spark-classes-00000000000000bb-3.jsa.kept"


@pytest.mark.timeout(600)
def test_the_command_removes_archives_unused_for_30_days(made: ClassArchive) -> None:
    """Another digest's archive unused for 31 days and a stopped maker's partial file go; the
    current archive (however old its mark), a recent one of another digest and files of other
    names stay, until the recent one too is 31 days unused.
    """
    folder = made.path.parent
    _age(made.path, 40 * 86_400)
    sizes = {_OLD: 3, _RECENT: 4, _PARTIAL: 5, _NOT_ORDOS: 6}
    for name, size in sizes.items():
        (folder / name).write_bytes(bytes(size))
        _age(folder / name, (29 if name == _RECENT else 31) * 86_400)
    try:
        ran = _archive_command(folder)
        assert ran.stdout.splitlines()[3:] == [
            f"removed     {folder / _OLD} (3 bytes)",
            f"removed     {folder / _PARTIAL} (5 bytes)",
        ]
        assert ran.stdout.split()[:6] == [
            "archive",
            str(made.path),
            "size_bytes",
            str(made.size_bytes),
            "made",
            "false",
        ]
        left = sorted(path.name for path in folder.iterdir())
        assert left == sorted([made.path.name, "spark-classes.lock", _RECENT, _NOT_ORDOS])
        _age(folder / _RECENT, 31 * 86_400)
        removed = json.loads(_archive_command(folder, "--json").stdout)["removed"]
        assert removed == [{"path": str(folder / _RECENT), "size_bytes": 4}]
    finally:
        for name in sizes:
            (folder / name).unlink(missing_ok=True)
    assert made.path.is_file()


def _archive_command(folder: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ordo", "spark", "archive", *options],
        env=_environment(folder),
        capture_output=True,
        text=True,
        check=True,
    )


@pytest.mark.parametrize("damage", ["cut short", "overwritten within"])
@pytest.mark.timeout(600)
def test_a_damaged_archive_still_starts_spark(
    made: ClassArchive, tmp_path: Path, damage: str
) -> None:
    """Java 17 crashed on both (SIGBUS, SIGSEGV) rather than start without the archive."""
    folder = tmp_path / "archives"
    folder.mkdir()
    damaged = folder / made.path.name
    shutil.copyfile(made.path, damaged)
    if damage == "cut short":
        os.truncate(damaged, made.size_bytes // 2)
    else:
        with damaged.open("r+b") as file:
            file.seek(made.size_bytes // 4)
            file.write(bytes(5 << 20))
    classes = _start(folder, tmp_path / "classes.log")
    assert _FROM_JAR in classes
    assert "shared objects file (top)" not in classes


def test_off_leaves_the_option_out(made: ClassArchive) -> None:
    environ = {"SPARK_SUBMIT_OPTS": OPTIONS, "ORDO_SPARK_CLASS_ARCHIVE": str(made.path.parent)}
    assert driver_options(environ) == f"-XX:SharedArchiveFile={made.path} -XX:+VerifySharedSpaces"
    assert driver_options({**environ, "ORDO_SPARK_CLASS_ARCHIVE": "off"}) is None
    assert driver_options({**environ, "ORDO_SPARK_CLASS_ARCHIVE": "OFF"}) is None
    assert archive_folder({"ORDO_SPARK_CLASS_ARCHIVE": "off"}) is None
    # the user's own choice of class-data sharing wins; ordo's would only contradict it
    assert driver_options({**environ, "SPARK_SUBMIT_OPTS": f"{OPTIONS} -Xshare:off"}) is None


def test_the_default_folder_is_the_users_cache(tmp_path: Path) -> None:
    assert archive_folder({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "ordo"
    assert archive_folder({"XDG_CACHE_HOME": "relative"}) == Path.home() / ".cache" / "ordo"
    assert archive_folder({"ORDO_SPARK_CLASS_ARCHIVE": ""}) == Path.home() / ".cache" / "ordo"


def test_an_archive_that_cannot_be_made_is_one_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("a file where a folder of archives should be")
    output = tmp_path / "spark.log"
    refusals = {
        tmp_path / "file" / "archives": "cannot write Spark's class archive in",
        tmp_path / "a:b": "a folder of Spark's class archives cannot hold ':'",
    }
    for folder, refusal in refusals.items():
        with pytest.raises(ClassArchiveError, match=refusal):
            make_archive(folder=folder, options=OPTIONS, output=output)
    with pytest.raises(
        ClassArchiveError, match=r"chooses class-data sharing itself \(-Xshare:on\)"
    ):
        make_archive(folder=tmp_path, options=f"{OPTIONS} -Xshare:on", output=output)


@pytest.mark.parametrize(
    ("environ", "line"),
    [
        (
            {"ORDO_SPARK_CLASS_ARCHIVE": "off"},
            "Error: ClassArchiveError: ORDO_SPARK_CLASS_ARCHIVE is off: unset it (or name a "
            "folder) to make an archive",
        ),
        (
            {"ORDO_SPARK_CLASS_ARCHIVE": "{tmp}/file/archives"},
            "Error: ClassArchiveError: cannot write Spark's class archive in {tmp}/file/archives: "
            "Not a directory",
        ),
        (
            {"ORDO_SPARK_CLASS_ARCHIVE": "{tmp}/archives", "JAVA_HOME": "{tmp}/no-java"},
            "Error: ClassArchiveError: no Java found in $JAVA_HOME/bin: Spark needs Java 17 or "
            "later (set JAVA_HOME)",
        ),
        (
            {"ORDO_SPARK_CLASS_ARCHIVE": "{tmp}/archives", "SPARK_HOME": "{tmp}/no-spark"},
            "Error: ClassArchiveError: the warm-up start of Spark failed: FileNotFoundError: "
            "[Errno 2] No such file or directory: '{tmp}/no-spark/./bin/spark-submit' (Spark's "
            "output: {tmp}/spark.log)",
        ),
    ],
    ids=["off", "a file in the path", "no java", "a failed warm-up"],
)
def test_the_command_says_why_it_made_no_archive_in_one_line(
    tmp_path: Path, environ: dict[str, str], line: str
) -> None:
    (tmp_path / "file").write_text("a file where a folder of archives should be")
    settings = {name: value.format(tmp=tmp_path) for name, value in environ.items()}
    settings |= {"SPARK_SUBMIT_OPTS": OPTIONS, "ORDO_SPARK_LOG": str(tmp_path / "spark.log")}
    result = CliRunner().invoke(cli, ["spark", "archive", "--json"], env=settings)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == line.format(tmp=tmp_path)
    assert result.stdout == ""
    assert not [*tmp_path.rglob("*.jsa"), *tmp_path.rglob("*.partial")]
