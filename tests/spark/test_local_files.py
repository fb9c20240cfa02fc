"""Spark's local files go through ordo's forkless Hadoop file systems (`ordo.spark.local_files`).

Hadoop's own local file system, without its native library, runs `chmod` for each file and
folder it creates and `readlink` for each rename through a FileContext. The run's session
(start_session on local[2]) writes a streaming query's checkpoint, state store and sink with
no such process, and the file systems answer as Hadoop's own: the processes are counted with
Java Flight Recorder's process-start events inside the session's JVM.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from ordo.spark.local_files import FILE_SYSTEMS, local_files_jar

pytestmark = pytest.mark.spark

_FORKING_COMMANDS = {"chmod", "readlink", "ls", "stat"}
"""What Hadoop's local file system runs without its native library (`rm` is Spark's own)."""
_HADOOPS = "org.apache.hadoop.fs.LocalFileSystem"


@contextmanager
def _processes_started(spark: SparkSession, folder: Path) -> Iterator[list[str]]:
    """The commands of the processes the session's JVM starts within the block."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    recording = jvm.jdk.jfr.Recording()
    recording.enable("jdk.ProcessStart")
    recording.start()
    commands: list[str] = []
    try:
        yield commands
    finally:
        recording.stop()
        dump = jvm.java.io.File(str(folder / "processes.jfr")).toPath()
        recording.dump(dump)
        recording.close()
        events = jvm.jdk.jfr.consumer.RecordingFile.readAllEvents(dump)
        commands.extend(str(event.getString("command")) for event in events)


def _forking(commands: list[str]) -> list[str]:
    return [command for command in commands if command.split()[0] in _FORKING_COMMANDS]


def _file_system(spark: SparkSession, implementation: str | None = None) -> Any:
    """A new local FileSystem of the session's Hadoop configuration, or of `implementation`."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    conf = jvm.org.apache.hadoop.conf.Configuration(spark.sparkContext._jsc.hadoopConfiguration())
    if implementation is not None:
        conf.set("fs.file.impl", implementation)
    return jvm.org.apache.hadoop.fs.FileSystem.newInstance(jvm.java.net.URI("file:///"), conf)


def test_the_session_names_ordos_file_systems_for_local_files(spark: SparkSession) -> None:
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, name in FILE_SYSTEMS.items():
        assert hadoop.get(key.removeprefix("spark.hadoop.")) == name
    assert _file_system(spark).getClass().getName() == FILE_SYSTEMS["spark.hadoop.fs.file.impl"]


def test_a_stateful_stream_writes_its_checkpoint_and_files_without_a_process(
    spark: SparkSession, tmp_path: Path
) -> None:
    """And Hadoop's own file system, in the same recording's way, starts one per file."""
    source = tmp_path / "in"
    spark.createDataFrame([(n % 5, n) for n in range(40)], "k INT, v INT").write.parquet(
        str(source)
    )
    stream = spark.readStream.schema("k INT, v INT").parquet(str(source)).dropDuplicates(["k"])
    with _processes_started(spark, tmp_path) as ordos:
        query = (
            stream.writeStream.format("parquet")
            .option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
    assert sorted(row.k for row in spark.read.parquet(str(tmp_path / "out")).collect()) == list(
        range(5)
    )
    assert (tmp_path / "checkpoint" / "commits" / "0").is_file()
    assert (tmp_path / "checkpoint" / "state").is_dir()
    assert not _forking(ordos), ordos
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    with _processes_started(spark, tmp_path) as hadoops:
        created = _file_system(spark, _HADOOPS).create(
            jvm.org.apache.hadoop.fs.Path(str(tmp_path / "file"))
        )
        created.close()
    assert _forking(hadoops)


@pytest.mark.parametrize("implementation", [None, _HADOOPS])
def test_permissions_and_links_are_what_hadoops_own_file_system_makes_of_them(
    spark: SparkSession, tmp_path: Path, implementation: str | None
) -> None:
    """The same calls through ordo's file system (None: the session's) and Hadoop's."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop_fs = jvm.org.apache.hadoop.fs
    file_system = _file_system(spark, implementation)
    permission: Callable[[int], Any] = jvm.org.apache.hadoop.fs.permission.FsPermission
    os.umask(old := os.umask(0o022))
    folder, file, link = tmp_path / "folder", tmp_path / "folder" / "file", tmp_path / "link"
    assert file_system.mkdirs(hadoop_fs.Path(str(folder)), permission(0o750))
    file_system.create(hadoop_fs.Path(str(file))).close()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o750 & ~old
    assert stat.S_IMODE(file.stat().st_mode) == 0o644 & ~old
    file_system.setPermission(hadoop_fs.Path(str(file)), permission(0o604))
    assert stat.S_IMODE(file.stat().st_mode) == 0o604
    link.symlink_to(file)
    linked = file_system.getFileLinkStatus(hadoop_fs.Path(str(link)))
    assert linked.isSymlink()
    assert Path(linked.getSymlink().toUri().getPath()) == file
    plain = file_system.getFileLinkStatus(hadoop_fs.Path(str(file)))
    assert (plain.isSymlink(), plain.isFile(), plain.getLen()) == (False, True, 0)
    assert file_system.getFileLinkStatus(hadoop_fs.Path(str(folder))).isDirectory()
    with pytest.raises(Py4JJavaError, match="FileNotFoundException"):
        file_system.getFileLinkStatus(hadoop_fs.Path(str(tmp_path / "missing")))


def test_the_jar_is_built_once_into_the_users_cache(tmp_path: Path) -> None:
    """Whatever folder the class archives have."""
    environ = {"XDG_CACHE_HOME": str(tmp_path), "ORDO_SPARK_CLASS_ARCHIVE": str(tmp_path / "a")}
    jar = local_files_jar(environ)
    assert jar is not None
    assert jar.parent == tmp_path / "ordo"
    built = jar.stat().st_mtime_ns
    assert local_files_jar({**environ, "ORDO_SPARK_CLASS_ARCHIVE": "off"}) == jar
    assert jar.stat().st_mtime_ns == built
    assert sorted(path.name for path in tmp_path.iterdir()) == ["ordo"]
    assert sorted(path.name for path in jar.parent.iterdir()) == [jar.name]


@pytest.mark.parametrize(
    ("variable", "value"),
    [("SPARK_SUBMIT_OPTS", "-XX:ArchiveClassesAtExit=a.jsa"), ("PYSPARK_GATEWAY_PORT", "4040")],
)
def test_no_jar_for_a_jvm_making_a_class_archive_or_one_pyspark_does_not_start(
    tmp_path: Path, variable: str, value: str
) -> None:
    """The archive holds Spark's classes only, so that a start with the jar, or without, maps
    it; spark-submit's running JVM has its class path already."""
    assert local_files_jar({"XDG_CACHE_HOME": str(tmp_path), variable: value}) is None
    assert not list(tmp_path.iterdir())


def test_a_java_that_cannot_compile_leaves_spark_to_hadoops_file_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """As a Java runtime without its compiler module: no jar, nothing left, the reason logged."""
    java = tmp_path / "java" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\necho 'Error: Module jdk.compiler not found' >&2\nexit 1\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "java"))
    cache = tmp_path / "cache"
    with caplog.at_level(logging.INFO, logger="ordo.spark.local_files"):
        assert local_files_jar({"XDG_CACHE_HOME": str(cache)}) is None
    assert "Module jdk.compiler not found" in caplog.text
    assert not list((cache / "ordo").iterdir())
