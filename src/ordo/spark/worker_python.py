"""The Python that Spark's Python workers run: this interpreter, importing pyspark compiled.

Spark starts a Python process for each streaming query's source, for the planning of each
batch read of a Python data source, and for each executor's worker daemon, and puts its own
copies of pyspark and py4j first on that process's PYTHONPATH: `python/lib/pyspark.zip`,
`python/lib/py4j-*-src.zip` and spark-core's jar (which holds no Python) under Spark's home.
Python compiles what it imports from a zip at every start, since zipimport keeps no bytecode
cache: importing ordo's source took 0.9 s with those entries and 0.4 s without, and a stream
pays it before its first batch.

When pyspark is installed as a package (pip's layout: Spark's home is the package's folder),
the zip holds the modules the package holds, compiled in site-packages. So with a local master
the workers run a launcher that drops exactly those entries from PYTHONPATH, wherever Spark put
them (a daemon gets them twice), keeps every other entry in its order, and execs this
interpreter. A master elsewhere runs its workers on other machines, where neither the launcher
nor this interpreter's path need exist: they run `sys.executable`, as before.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pyspark

logger = logging.getLogger(__name__)

LAUNCHER_NAME = "python-for-spark-workers"
"""The launcher's file name, in a private folder of this process (removed when it exits)."""

_LAUNCHER = """#!/bin/sh
# Written by ordo.spark.worker_python: Spark's Python workers import pyspark and py4j from
# site-packages, where their bytecode is cached, instead of compiling them from Spark's zips.
set -f
kept=
IFS=:
for entry in $PYTHONPATH; do
  case $entry in
    {dropped}) ;;
    *) kept=${{kept:+$kept:}}$entry ;;
  esac
done
export PYTHONPATH="$kept"
exec {python} "$@"
"""


def worker_python(master: str) -> str:
    """The Python for the workers of a session on `master`: the launcher where it applies.

    That is a local master (`local`, `local[N]`, `local-cluster[...]`) on a POSIX system with
    pyspark installed as a package, and a launcher that runs (a temp folder that cannot be
    written, or is mounted noexec, cannot hold one); anything else gets `sys.executable`.
    """
    dropped = spark_python_path()
    if not master.startswith("local") or os.name != "posix" or not dropped:
        return sys.executable
    launcher = _launcher(sys.executable, tuple(dropped), tempfile.gettempdir())
    return sys.executable if launcher is None else str(launcher)


def spark_python_path() -> list[str]:
    """The PYTHONPATH entries of Spark's home that the installed packages hold as well.

    Empty unless Spark's home is the pyspark package's folder. py4j's zip counts only when the
    installed py4j is the zip's version (pyspark pins it; a py4j installed apart might not be).
    """
    import importlib.metadata  # here: a source's process imports this module, never calls this

    home = Path(pyspark.__file__).parent
    lib = home / "python" / "lib"
    archive = lib / "pyspark.zip"
    if not archive.is_file():
        return []
    entries = [archive, *sorted(home.glob("jars/spark-core_*.jar"))]
    try:
        py4j = importlib.metadata.version("py4j")
    except importlib.metadata.PackageNotFoundError:
        py4j = None
    entries += [path for path in lib.glob("py4j-*-src.zip") if path.name == f"py4j-{py4j}-src.zip"]
    return [str(path) for path in entries]


@functools.cache
def _launcher(python: str, dropped: tuple[str, ...], temp: str) -> Path | None:
    """The launcher, written once per process in a folder of `temp` only this user can write to.

    It is run once here: None (logged) if it cannot be written or does not run.
    """
    try:
        folder = Path(tempfile.mkdtemp(prefix="ordo-spark-", dir=temp))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        launcher = folder / LAUNCHER_NAME
        patterns = "|".join(shlex.quote(entry) for entry in dropped)
        launcher.write_text(_LAUNCHER.format(dropped=patterns, python=shlex.quote(python)))
        launcher.chmod(0o700)
        ran = [str(launcher), "-S", "-c", ""]  # the file just written, in a private folder
        subprocess.run(ran, check=True, capture_output=True, timeout=60)  # noqa: S603
    except (OSError, subprocess.SubprocessError) as exc:
        logger.info("Spark's Python workers run %s: no launcher in %s (%s)", python, temp, exc)
        return None
    return launcher
