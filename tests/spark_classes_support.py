"""A class-data archive of Spark's driver JVM for the test run: each Spark start takes half as long.

The tests start Spark dozens of times (the session fixture, and every `ordo` command, driver
and bench script they run in a subprocess), and most of a start is the JVM loading and
verifying Spark's classes. The archive `ordo spark archive` makes for users
(`ordo.spark.class_archive`) maps them instead: a start and first job took 7 s instead of 14 s
on a loaded 2-CPU machine.

The run makes its own, once per Java and Spark install, in the virtual environment (CI starts
from a fresh machine), and gives it to every JVM through SPARK_SUBMIT_OPTS, not only to those
`start_session` starts: the fixtures, drivers and bench scripts build sessions of their own. A
run that cannot make one (no Java, a warm-up that failed) runs without it: slower, not wrong.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from ordo.errors import ClassArchiveError
from ordo.spark.class_archive import make_archive

FOLDER = Path(sys.prefix) / "ordo-test-cache"
"""Where the runs of this virtual environment keep their archive."""
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""The tests' driver JVM options (conftest.py says why), their archive's key with Java and Spark."""


def class_archive_options(base: str) -> str:
    """`base` JVM options plus the run's Spark class archive, made now if there is none yet.

    `base` alone when no archive can be made.
    """
    output = Path(tempfile.gettempdir()) / "ordo-tests-class-archive.log"
    try:
        archive = make_archive(folder=FOLDER, options=base, output=output, announce=_stderr)
    except ClassArchiveError as exc:
        _stderr(f"the tests run without Spark's class archive: {exc}")
        return base
    return f"{base} {archive.java_options}"


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)
