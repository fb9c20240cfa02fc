"""A class-data archive of Spark's driver JVM for the test run: each Spark start takes half as long.

The tests start Spark dozens of times (the session fixture, and every `ordo` command, driver
and bench script they run in a subprocess), and most of a start is the JVM loading and
verifying Spark's classes from its jars. Java's application class-data sharing maps the classes
an earlier start loaded from an archive instead (`-XX:SharedArchiveFile`): a start and first
job took 7 s instead of 14 s here on a loaded 2-CPU machine. Only the JVM's start changes; the
same Spark runs the same jobs.

The archive is made once per Java and pyspark install (its name holds a digest of both), in the
virtual environment, by a Spark start that writes the classes it loaded when its JVM exits
(`-XX:ArchiveClassesAtExit`, Java 13+). It writes to a temporary name that is renamed once that
JVM has exited, under a lock, so runs side by side neither make it twice nor read half of one. A
JVM whose class path or build does not match an archive ignores it (`-Xshare:auto`, the
default), and a start that fails to make one leaves the tests without it: slower, not wrong.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

_WARM_UP = """
import sys
from ordo.spark import start_session

spark = start_session(master="local[2]", app_name="ordo-tests-class-archive")
spark.range(1000).selectExpr("id % 7 AS k").groupBy("k").count().collect()
spark.range(10).mapInArrow(lambda batches: batches, "id long").collect()
jvm = spark.sparkContext._gateway.proc
spark.stop()
jvm.stdin.close()  # the gateway JVM exits when its stdin closes, writing the archive then
print(jvm.wait())
"""
"""A Spark start and two small jobs (SQL, a Python function over Arrow): the classes most
tests' starts load. What it does not load still loads from the jars."""
_MADE_IN_S = 300


def class_archive_options(base: str) -> str:
    """`base` JVM options plus the run's Spark class archive, made now if there is none yet.

    `base` alone when no archive can be made (no Java found, the warm-up start failed).
    """
    java = _java()
    if java is None:
        return base
    archive = _archive_path(java, base)
    if archive is None or " " in str(archive):  # the launcher splits the options at spaces
        return base
    if not archive.exists():
        archive.parent.mkdir(parents=True, exist_ok=True)
        with (archive.parent / ".lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another run making it: wait, then use its
            if not archive.exists():
                _make(archive, base)
    if not archive.exists():
        return base
    return f"{base} -XX:SharedArchiveFile={archive}"


def _java() -> Path | None:
    """The java binary Spark's launcher runs: $JAVA_HOME/bin/java, else `java` on the PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def _archive_path(java: Path, base: str) -> Path | None:
    """Where the archive of this Java, pyspark install and JVM options lives."""
    spec = importlib.util.find_spec("pyspark")  # not imported: most test runs need no Spark here
    if spec is None or spec.origin is None:
        return None
    jars = Path(spec.origin).parent / "jars"
    parts = [str(java), str(java.stat().st_mtime_ns), version("pyspark"), base]
    parts += sorted(f"{jar.name}:{jar.stat().st_size}" for jar in jars.glob("*.jar"))
    digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return Path(sys.prefix) / "ordo-test-cache" / f"spark-classes-{digest}.jsa"


def _make(archive: Path, base: str) -> None:
    """Start Spark once with the archive written at its JVM's exit; renamed in once whole."""
    print(
        f"making Spark's class archive for the tests (once per install): {archive}", file=sys.stderr
    )
    partial = archive.with_name(f"{archive.name}.{os.getpid()}.partial")
    environment = {**os.environ, "SPARK_SUBMIT_OPTS": f"{base} -XX:ArchiveClassesAtExit={partial}"}
    try:
        done = subprocess.run(
            [sys.executable, "-c", _WARM_UP],
            env=environment,
            capture_output=True,
            timeout=_MADE_IN_S,
            check=False,
        )
        if done.returncode == 0 and done.stdout.split()[-1:] == [b"0"] and partial.exists():
            partial.rename(archive)
    except subprocess.TimeoutExpired:
        pass  # the tests run without the archive
    finally:
        partial.unlink(missing_ok=True)
