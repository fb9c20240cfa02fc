"""Spark's classes from a class-data archive: a driver JVM that starts some 2 s sooner.

Much of a Spark start is its JVM loading and verifying Spark's classes from its jars. Java's
application class-data sharing (AppCDS) maps the classes an earlier start loaded from an archive
instead (`-XX:SharedArchiveFile`): a start and first small job took 4.4 s instead of 6.5 s on a
shared 2-CPU machine, a small materializer's whole command 13.4 s instead of 21.3 s on another
(bench/cli_start.py). Only the JVM's start changes; the same Spark runs the same jobs.

An archive belongs to one Java, one Spark install and one set of JVM options (its name holds a
digest of them), and lives in a folder: `$ORDO_SPARK_CLASS_ARCHIVE`, else the user's cache
(`$XDG_CACHE_HOME/ordo`, `~/.cache/ordo`). `ordo spark archive` makes one (`make_archive`):
a start of Spark that writes the classes it loaded when its JVM exits
(`-XX:ArchiveClassesAtExit`, Java 13+; 19+ could make one on its own, 17 cannot), under a lock,
to a temporary name renamed once that JVM has exited. ordo never makes one on its own (it
writes some 200 MB). `start_session` maps one that exists into the driver JVM it starts
(`driver_options`). Java ignores an archive of another class path or build (`-Xshare:auto`, the
default), but Java 17 crashes on a damaged one (SIGBUS, SIGSEGV) rather than ignore it: the name
also holds the size it was made with, and a file of another size (cut short) is never used, and
the JVM checks the checksums the archive holds of its contents before it maps them
(`-XX:+VerifySharedSpaces`, some 50 ms of a start), ignoring it when one differs.

A new Java or pyspark leaves the archive of the old one in the folder: `start_session` marks the
archive it maps as used (`mark_used`: its modification time, which Java does not check), and
`ordo spark archive` removes the folder's archives unused for 30 days
(`ordo.spark.class_archive_cleanup`).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ordo.errors import ClassArchiveError
from ordo.settings.variables import CLASS_ARCHIVE_VARIABLE

logger = logging.getLogger(__name__)

OFF = "off"
"""The value of ORDO_SPARK_CLASS_ARCHIVE with which no start maps an archive."""
SUBMIT_OPTIONS_VARIABLE = "SPARK_SUBMIT_OPTS"
"""The JVM options Spark's launcher gives every driver JVM it starts, before any of Spark's
settings' (`spark.driver.extraJavaOptions` follows them)."""
LOCK_NAME = "spark-classes.lock"
"""The lock file in the folder: its holder makes an archive, or removes unused ones."""
MARKED_EVERY_S = 86_400.0
"""How old an archive's mark of use (its modification time) gets before a start renews it: at
most one write a day, not one per start."""
MADE_IN_S = 300.0
"""How long the warm-up start may take: half a minute to a minute on a loaded 2-CPU machine."""
_OWN_SHARING = re.compile(r"-XX:(?:SharedArchiveFile|ArchiveClassesAtExit)=\S*|-Xshare:\S*")
"""JVM options that choose class-data sharing themselves: the user's, which ordo's would only
contradict (a JVM making an archive refuses a dynamic one to start from)."""
_SEPARATORS = re.compile(r"[:\x00\n]")
"""What a folder of archives may not hold: Java reads `a:b` in -XX:SharedArchiveFile as two
archives, and Spark's launcher passes options on one line."""
GATEWAY_PORT_VARIABLE = "PYSPARK_GATEWAY_PORT"
"""Set, PySpark connects to a JVM that is running (spark-submit's) and starts none."""
_WARM_UP = "ordo.spark.class_archive_warm_up"
"""The module the making start runs: the jobs whose classes the archive holds."""
_WARM_UP_FILE = Path(__file__).with_name("class_archive_warm_up.py")
"""Its source, part of an archive's key: another warm-up (a new ordo) makes a new archive."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassArchive:
    """An archive of Spark's classes, whole: `size_bytes`, the size it was made with."""

    path: Path
    size_bytes: int
    is_new: bool
    """Whether the call that returned it made it (False: it was there already)."""

    @property
    def java_options(self) -> str:
        """The options that map it, checked, quoted as Spark's launcher reads SPARK_SUBMIT_OPTS."""
        return f"{shlex.quote(f'-XX:SharedArchiveFile={self.path}')} -XX:+VerifySharedSpaces"


def archive_folder(environ: Mapping[str, str]) -> Path | None:
    """The folder of the archives: ORDO_SPARK_CLASS_ARCHIVE, else the user's cache; None if off.

    The cache is `user_cache`. An empty variable is the default, as an empty ORDO_SPARK_LOG is.
    """
    chosen = environ.get(CLASS_ARCHIVE_VARIABLE, "").strip()
    if chosen.lower() == OFF:
        return None
    if chosen:
        return Path(chosen).expanduser()
    return user_cache(environ)


def user_cache(environ: Mapping[str, str]) -> Path:
    """The folder of ordo in the user's cache: `$XDG_CACHE_HOME/ordo`, else `~/.cache/ordo`.

    The XDG specification ignores a relative `$XDG_CACHE_HOME`.
    """
    cache = environ.get("XDG_CACHE_HOME", "")
    return (Path(cache) if Path(cache).is_absolute() else Path.home() / ".cache") / "ordo"


def submit_options(environ: Mapping[str, str]) -> str:
    """The JVM options Spark's launcher gives a driver JVM from `environ`: an archive's key."""
    return environ.get(SUBMIT_OPTIONS_VARIABLE, "").strip()


def find_archive(folder: Path, options: str) -> ClassArchive | None:
    """The whole archive in `folder` of this Java, Spark and JVM `options`, if one was made.

    ClassArchiveError without Java or pyspark (nothing to have an archive of), or for a folder
    whose path a JVM option cannot hold.
    """
    stem = _stem(folder, options)
    for path in folder.glob(f"{stem}-*.jsa"):
        size = path.name.removeprefix(f"{stem}-").removesuffix(".jsa")
        if size.isdigit() and _size(path) == int(size):
            return ClassArchive(path=path, size_bytes=int(size), is_new=False)
    return None


def make_archive(
    *,
    folder: Path,
    options: str,
    output: Path,
    announce: Callable[[str], object] | None = None,
    timeout_s: float = MADE_IN_S,
) -> ClassArchive:
    """The archive of this Java, Spark and JVM `options` in `folder`, made now if there is none.

    Making it is one start of Spark running small jobs and a stream with `options`
    (`ordo.spark.class_archive_warm_up`; its JVM's console output in `output`), whose JVM
    writes the classes it loaded as it exits; `announce` is told so as it starts, once the
    folder is known to be writable. One maker at a time per folder (a lock file in it): a
    second waits, then returns the first's archive. What a maker stopped half-way left (a
    temporary file, an archive cut short) is removed. ClassArchiveError when it cannot be
    made: no Java or pyspark, a folder that cannot be created or written,
    `options` that choose class-data sharing themselves, a warm-up that failed or took longer
    than `timeout_s`.
    """
    own = _OWN_SHARING.search(options)
    if own is not None:
        msg = (
            f"{SUBMIT_OPTIONS_VARIABLE} chooses class-data sharing itself ({own[0]}): "
            "ordo's archive would not be used; leave that option out to make one"
        )
        raise ClassArchiveError(msg)
    stem = _stem(folder, options)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock = (folder / LOCK_NAME).open("a")
    except OSError as exc:
        msg = f"cannot write Spark's class archive in {folder}: {exc.strerror or exc}"
        raise ClassArchiveError(msg) from exc
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another maker: wait, then use its archive
        found = find_archive(folder, options)
        if found is not None:
            return found
        for left in folder.glob(f"{stem}[-.]*"):  # no maker runs: a stopped one's, or cut short
            left.unlink(missing_ok=True)
        partial = folder / f"{stem}.{os.getpid()}.partial"
        if announce is not None:
            announce(
                f"making Spark's class archive in {folder}: one start of Spark, about a minute "
                f"(its own output goes to {output}) ..."
            )
        try:
            _warm_up(partial, options=options, output=output, timeout_s=timeout_s)
            size = partial.stat().st_size
            archive = partial.rename(folder / f"{stem}-{size}.jsa")
        finally:
            partial.unlink(missing_ok=True)
    return ClassArchive(path=archive, size_bytes=size, is_new=True)


def driver_options(environ: Mapping[str, str]) -> str | None:
    """The JVM options mapping the archive for a driver JVM started with `environ`, or None.

    None when ORDO_SPARK_CLASS_ARCHIVE is off, when no whole archive of this Java, Spark and
    SPARK_SUBMIT_OPTS was made, when SPARK_SUBMIT_OPTS chooses class-data sharing itself (the
    user's choice wins), and when PySpark will start no JVM (PYSPARK_GATEWAY_PORT). Never
    raises: a start without the archive is slower, not wrong. The archive found is marked
    used (`mark_used`): start_session calls this only for a JVM it starts with it.
    """
    folder = archive_folder(environ)
    options = submit_options(environ)
    if folder is None or GATEWAY_PORT_VARIABLE in environ or _OWN_SHARING.search(options):
        return None
    try:
        found = find_archive(folder, options)
    except (ClassArchiveError, OSError):
        return None
    if found is None:
        return None
    mark_used(found.path)
    return found.java_options


def mark_used(path: Path) -> None:
    """Mark the archive at `path` used now, so that `ordo spark archive` keeps it.

    The mark is the file's modification time, renewed once it is MARKED_EVERY_S old. Java
    checks an archive's header, checksums and the class path's jars, not the archive file's own
    times: a marked archive still maps (tests/spark/test_class_archive.py). A file that cannot be
    marked (a folder of someone else's, read-only) stays as it is: the mark only decides when
    the file may be removed.
    """
    try:
        if time.time() - path.stat().st_mtime >= MARKED_EVERY_S:
            os.utime(path)
    except OSError as exc:
        logger.debug("class archive not marked used path=%s error=%s", path, exc)


def _stem(folder: Path, options: str) -> str:
    """`spark-classes-<digest>`: `install_digest` of `options` and the warm-up's code.

    Spark's launcher runs $JAVA_HOME/bin/java, else `java` on the PATH, with the jars of
    $SPARK_HOME, else of the pyspark package (as PySpark finds them); a warm-up that loads
    other classes changes the digest too.
    """
    if _SEPARATORS.search(str(folder)):
        msg = f"a folder of Spark's class archives cannot hold ':' or a line break: {folder}"
        raise ClassArchiveError(msg)
    return f"spark-classes-{install_digest(options, _WARM_UP_FILE.read_text())}"


def install_digest(*texts: str) -> str:
    """A digest of the Java and Spark install that Spark's launcher runs, and of `texts`.

    Java is its binary's path and time, Spark its jars' names (which hold Spark's version) and
    sizes: a Java or Spark installed anew changes it. What is built for one install (a class
    archive, the local files' jar) is named with it. ClassArchiveError without Java or pyspark.
    """
    java = java_binary()
    parts = [str(java), str(java.stat().st_mtime_ns), *texts]
    parts += sorted(f"{jar.name}:{jar.stat().st_size}" for jar in spark_jars().glob("*.jar"))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def java_binary() -> Path:
    """The java binary Spark's launcher runs: $JAVA_HOME/bin/java, else `java` on the PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found or not Path(found).is_file():
        where = "in $JAVA_HOME/bin" if home else "on the PATH"
        msg = f"no Java found {where}: Spark needs Java 17 or later (set JAVA_HOME)"
        raise ClassArchiveError(msg)
    return Path(found).resolve()


def spark_jars() -> Path:
    """The folder of Spark's jars: $SPARK_HOME/jars, else the pyspark package's (not imported)."""
    home = os.environ.get("SPARK_HOME")
    if home:
        return Path(home) / "jars"
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        msg = "pyspark is not installed (ordo's spark extra): there is no Spark to archive"
        raise ClassArchiveError(msg)
    return Path(spec.origin).parent / "jars"


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _warm_up(partial: Path, *, options: str, output: Path, timeout_s: float) -> None:
    """Start Spark with the archive written to `partial` at its JVM's exit; wait for that exit."""
    written = shlex.quote(f"-XX:ArchiveClassesAtExit={partial}")
    environment = {key: value for key, value in os.environ.items() if key != GATEWAY_PORT_VARIABLE}
    environment[SUBMIT_OPTIONS_VARIABLE] = f"{options} {written}".strip()
    environment[CLASS_ARCHIVE_VARIABLE] = OFF  # the warm-up's start maps no archive
    try:
        done = subprocess.run(  # noqa: S603 - this interpreter and ordo's own script
            [sys.executable, "-m", _WARM_UP, str(output)],
            env=environment,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        took = f"took longer than {timeout_s:g} s"
        msg = f"the warm-up start of Spark {took} (Spark's output: {output})"
        raise ClassArchiveError(msg) from None
    status = done.stdout.split()[-1:]
    if done.returncode == 0 and status == ["0"] and partial.is_file():
        return
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    if done.returncode != 0:
        reason = lines[-1].strip() if lines else f"exit status {done.returncode}"
    else:
        reason = f"its JVM exited with status {' '.join(status) or '?'} and wrote no archive"
    msg = f"the warm-up start of Spark failed: {reason} (Spark's output: {output})"
    raise ClassArchiveError(msg)
