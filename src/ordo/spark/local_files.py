"""Spark's local files without a process per file: Hadoop's local file system, minus its forks.

Without Hadoop's native library, which pyspark does not ship, Hadoop's local file system runs
`chmod` for every file and folder it creates and `readlink` for every rename through a
FileContext: a process each, some 5 ms on a 2-CPU machine. A streaming query's checkpoint and
RocksDB state store create and rename a few dozen files per micro-batch: a small `availableNow`
run of the materializer started about a hundred processes, a quarter of its time. The Java
classes beside this module (`java/`, package `ordo.hadoop`) do both through java.nio and leave
everything else to Hadoop, checksum files included: what is written does not change.

`start_session` builds them into a jar once per Java, Spark and ordo (`local_files_jar`, with
the compiler module of the Java that runs Spark, which Debian's JRE package has: a second or
two, in the user's cache, `~/.cache/ordo`), puts it last on the class path of a local master's
driver JVM it starts (`DIST_CLASSPATH_VARIABLE`, which Spark's launcher puts after Spark's jars,
so a class archive of Spark's classes still maps), and names its file systems in the context's
conf (`file_system_settings`) unless the user named others. A cluster's executors have no such
jar: sessions on a cluster keep Hadoop's. Where it cannot be built (no compiler module, a cache
that cannot be written) Spark runs as before, and a line in the log says why.
"""

from __future__ import annotations

import logging
import os
import subprocess
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

from py4j.java_gateway import JVMView
from py4j.protocol import Py4JJavaError
from pyspark import SparkConf

from ordo.errors import ClassArchiveError
from ordo.spark.class_archive import (
    GATEWAY_PORT_VARIABLE,
    SUBMIT_OPTIONS_VARIABLE,
    install_digest,
    java_binary,
    spark_jars,
    user_cache,
)

logger = logging.getLogger(__name__)

FILE_SYSTEMS = {
    "spark.hadoop.fs.file.impl": "ordo.hadoop.ForklessLocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "ordo.hadoop.ForklessLocalFs",
}
"""The settings that make Spark's `file:` paths use the jar's file systems (FileSystem, and
FileContext: checkpoints write through the latter)."""
DIST_CLASSPATH_VARIABLE = "SPARK_DIST_CLASSPATH"
"""Class path entries Spark's launcher appends to a driver JVM's, after Spark's own jars."""
SOURCES = Path(__file__).with_name("java")
"""The Java sources of the jar."""
BUILT_IN_S = 120.0
"""How long compiling the sources may take (about a second)."""
_MAKING_ARCHIVE = "-XX:ArchiveClassesAtExit"
"""In SPARK_SUBMIT_OPTS: the JVM makes a class archive (`ordo.spark.class_archive`), which
holds Spark's classes only, so that a start with the jar last on its class path, or without
it, still maps it."""


def local_files_jar(environ: Mapping[str, str]) -> Path | None:
    """The jar of the forkless file systems for this Java and Spark, built now if missing.

    In the user's cache (`user_cache`, one jar for every start of the machine's user: another
    ORDO_SPARK_CLASS_ARCHIVE folder builds none). None (logged) when it cannot be built,
    for a JVM that makes a class archive, and when PySpark starts no JVM (PYSPARK_GATEWAY_PORT:
    spark-submit's is running).
    """
    making_archive = _MAKING_ARCHIVE in environ.get(SUBMIT_OPTIONS_VARIABLE, "")
    if making_archive or GATEWAY_PORT_VARIABLE in environ:
        return None
    folder = user_cache(environ)
    try:
        sources = sorted(SOURCES.glob("*.java"))
        digest = install_digest(*(source.read_text() for source in sources))
        jar = folder / f"spark-local-files-{digest}.jar"
        failed = None if jar.is_file() else _build(jar, sources=sources)
    except (ClassArchiveError, OSError, subprocess.SubprocessError) as exc:
        failed = str(exc)
    if failed is not None:
        logger.info("Spark's local files go through Hadoop's own file system: %s", failed)
        return None
    return jar


def file_system_settings(jvm: JVMView) -> list[tuple[str, str]]:
    """FILE_SYSTEMS, for a context of `jvm` whose class path holds the jar.

    None of them when the JVM's defaults (spark-defaults.conf, `--conf` in PYSPARK_SUBMIT_ARGS)
    name a file system of their own for `file:` paths: the user's choice is kept.
    """
    defaults = SparkConf(_jvm=jvm)
    if any(defaults.contains(key) for key in FILE_SYSTEMS):
        return []
    try:
        for name in FILE_SYSTEMS.values():
            jvm.java.lang.Class.forName(name)
    except Py4JJavaError:  # a JVM started without the jar
        return []
    return list(FILE_SYSTEMS.items())


def _build(jar: Path, *, sources: list[Path]) -> str | None:
    """Compile `sources` against Spark's Hadoop jars with its Java's compiler module into `jar`.

    The reason it failed, or None. Written to a temporary name and renamed: a concurrent start
    sees a whole jar or none (two builders write the same classes; the last rename wins).
    """
    java, class_path = java_binary(), sorted(spark_jars().glob("hadoop-*.jar"))
    if not class_path:
        return f"Spark's jars in {spark_jars()} hold no Hadoop client"
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ordo-local-files-") as built:
        compiled = subprocess.run(  # noqa: S603 - the java Spark runs, ordo's own sources
            [
                str(java),
                *("-m", "jdk.compiler/com.sun.tools.javac.Main", "-nowarn", "-proc:none"),
                *("-implicit:none", "-d", built, "-cp", os.pathsep.join(map(str, class_path))),
                *map(str, sources),
            ],
            capture_output=True,
            text=True,
            timeout=BUILT_IN_S,
            check=False,
        )
        if compiled.returncode != 0:
            lines = [line for line in compiled.stderr.splitlines() if line.strip()]
            reason = lines[0].strip() if lines else f"exit status {compiled.returncode}"
            return f"compiling ordo's Hadoop file systems with {java} failed: {reason}"
        partial = jar.with_name(f"{jar.stem}.{os.getpid()}.partial")
        try:
            with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
                for path in sorted(Path(built).rglob("*.class")):
                    archive.write(path, path.relative_to(built).as_posix())
            partial.rename(jar)
        finally:
            partial.unlink(missing_ok=True)
    return None
