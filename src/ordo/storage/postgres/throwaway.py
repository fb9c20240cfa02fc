"""A private, disposable PostgreSQL cluster for tests and benchmarks.

The test suite and the benchmarks need a real server with logical decoding enabled, but
must not depend on (or disturb) whatever cluster the machine already runs. So this module
drives the server binaries directly: `initdb` into a temporary directory, `pg_ctl start`
on a free loopback port, and `pg_ctl stop` plus removal of the directory at the end.

It deliberately does not import psycopg, so it works without the `postgres` extra.
"""

from __future__ import annotations

import logging
import os
import pwd
import shlex
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from ordo.errors import StorageUnavailableError

logger = logging.getLogger(__name__)

_ADVICE = "run scripts/bootstrap to install the PostgreSQL 15 server"
_SERVER_USER = "postgres"
_DEBIAN_ROOT = Path("/usr/lib/postgresql")
_START_ATTEMPTS = 3  # a free port can be taken by someone else before the server binds it
_LOG_TAIL_LINES = 40
_COMMAND_TIMEOUT_S = 120

# Logical decoding for CDC; durability off because the cluster is thrown away anyway.
_SERVER_SETTINGS = (
    "wal_level=logical",
    "max_replication_slots=20",
    "max_wal_senders=20",
    "fsync=off",
    "synchronous_commit=off",
    "full_page_writes=off",
    "max_connections=200",
    "shared_buffers=256MB",
)


def find_server_bindir() -> Path:
    """Return the directory holding `initdb` and `pg_ctl`.

    Prefers the highest version under /usr/lib/postgresql (Debian's layout), then
    `pg_config --bindir`. Called by ThrowawayPostgres when no bindir is given.

    Raises:
        StorageUnavailableError: no server binaries are installed.

    """
    installed = [
        (version, bindir)
        for bindir in _DEBIAN_ROOT.glob("*/bin")
        if (version := _parse_version(bindir.parent.name)) is not None
        and _has_server_binaries(bindir)
    ]
    if installed:
        return max(installed)[1]
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        result = _run([pg_config, "--bindir"])
        bindir = Path(result.stdout.strip())
        if result.returncode == 0 and _has_server_binaries(bindir):
            return bindir
    msg = f"no PostgreSQL server binaries (initdb, pg_ctl) found: {_ADVICE}"
    raise StorageUnavailableError(msg)


class ThrowawayPostgres:
    """A PostgreSQL cluster that lives in a temp dir for one `with` block.

    Test fixtures and benchmarks enter it once and connect to `dsn` (user `postgres`,
    trust authentication, 127.0.0.1 only). Leaving the block stops the server and deletes
    every file. As root it runs the server as the `postgres` system user, because
    PostgreSQL refuses to run as root. Not thread-safe: start and stop it from one thread.

    Args:
        bindir: Directory with `initdb` and `pg_ctl`; found with find_server_bindir()
            when omitted.
        base_dir: Where the temporary cluster directory is created; the system temp dir
            when omitted. As root it must be reachable by the `postgres` user.
        settings: Server settings (`name=value`) applied over the defaults, e.g. a test of
            what ordo does on a server without logical decoding (`wal_level=replica`).

    """

    def __init__(
        self,
        *,
        bindir: Path | None = None,
        base_dir: Path | None = None,
        settings: Sequence[str] = (),
    ) -> None:
        self._requested_bindir = bindir
        self._base_dir = base_dir
        self._settings = tuple(settings)
        self._bindir: Path | None = None
        self._workdir: Path | None = None
        self._port: int | None = None
        self._as_server_user: list[str] = []

    @property
    def port(self) -> int:
        """The TCP port the running server listens on (127.0.0.1 only)."""
        if self._port is None:
            msg = "ThrowawayPostgres is not running: use it as a context manager"
            raise StorageUnavailableError(msg)
        return self._port

    @property
    def dsn(self) -> str:
        """A libpq URL for the `postgres` database as the `postgres` superuser."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def __enter__(self) -> ThrowawayPostgres:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Create the cluster and start the server; returns once it accepts connections.

        Raises:
            StorageUnavailableError: binaries are missing or the server did not start;
                the message carries the tail of the server log.

        """
        if self._workdir is not None:
            msg = "ThrowawayPostgres is already running"
            raise StorageUnavailableError(msg)
        self._bindir = self._requested_bindir or find_server_bindir()
        if not _has_server_binaries(self._bindir):
            msg = f"no initdb and pg_ctl in {self._bindir}: {_ADVICE}"
            raise StorageUnavailableError(msg)
        self._as_server_user = _server_user_prefix()
        self._workdir = Path(tempfile.mkdtemp(prefix="ordo-pg-", dir=self._base_dir))
        try:
            if self._as_server_user:
                entry = pwd.getpwnam(_SERVER_USER)
                os.chown(self._workdir, entry.pw_uid, entry.pw_gid)
            self._initdb()
            self._start_server()
        except BaseException:
            self.stop()
            raise
        logger.info("throwaway postgres started port=%d dir=%s", self._port, self._workdir)

    def stop(self) -> None:
        """Stop the server (immediate mode) and delete its directory. Safe to repeat."""
        workdir = self._workdir
        if workdir is None:
            return
        try:
            # postmaster.pid exists from server start until a clean stop, even after a failed -w.
            if (workdir / "data" / "postmaster.pid").exists():
                result = self._run_tool(
                    "pg_ctl", "-D", str(workdir / "data"), "-m", "immediate", "stop"
                )
                if result.returncode != 0:
                    logger.warning("throwaway postgres did not stop cleanly: %s", result.stdout)
        finally:
            self._workdir, self._port = None, None
            shutil.rmtree(workdir, ignore_errors=True)
        logger.info("throwaway postgres stopped dir=%s", workdir)

    def backup(self) -> Path:
        """Stop the server cleanly, copy its data directory, and start it again; returns the copy.

        A file-level backup, for `restore`: tests of what a source whose WAL goes back does to
        a capture. The copy lives in the cluster's directory, removed with it. The server
        listens on another port afterwards, which `dsn` names.
        """
        workdir = self._require_workdir()
        copy = Path(tempfile.mkdtemp(prefix="backup-", dir=workdir)) / "data"
        self._stop_cleanly()
        _copy_data(workdir / "data", copy)
        self._start_server()
        return copy

    def restore(self, backup: Path) -> None:
        """Stop the server, put a copy of `backup` (from `backup()`) in place, start it again.

        The server's WAL goes back to the backup's and its system identifier stays, as after a
        restore of a file copy or a point-in-time recovery, or a failover to a standby that had
        not received everything. `backup` is kept; `dsn` names the new port.
        """
        data = self._require_workdir() / "data"
        self._stop_cleanly()
        shutil.rmtree(data)
        _copy_data(backup, data)
        self._start_server()

    def move_wal_to(self, segment: str) -> None:
        """Stop the server cleanly, have it write its WAL on from `segment`, start it again.

        `pg_resetwal -l` with a WAL file name (`000000010020C49C00000000`): for tests of a
        server whose WAL positions are far on, which no test could write its way to. `dsn`
        names the new port.
        """
        data = self._require_workdir() / "data"
        self._stop_cleanly()
        result = self._run_tool("pg_resetwal", "-l", segment, "-D", str(data))
        if result.returncode != 0:
            msg = f"pg_resetwal failed in {data}:\n{result.stdout.strip()}"
            raise StorageUnavailableError(msg)
        self._start_server()

    def _stop_cleanly(self) -> None:
        """Stop the server with a shutdown checkpoint, so its data directory can be copied."""
        data = self._require_workdir() / "data"
        result = self._run_tool("pg_ctl", "-D", str(data), "-m", "fast", "-w", "stop")
        if result.returncode != 0:
            msg = f"PostgreSQL did not stop in {data}:\n{result.stdout.strip()}"
            raise StorageUnavailableError(msg)
        self._port = None

    def _initdb(self) -> None:
        workdir = self._require_workdir()
        result = self._run_tool(
            "initdb",
            "-D",
            str(workdir / "data"),
            "-A",
            "trust",
            "-U",
            _SERVER_USER,
            "--no-sync",
            "-E",
            "UTF8",
            "--locale=C",
        )
        if result.returncode != 0:
            msg = f"initdb failed in {workdir}:\n{result.stdout.strip()}"
            if self._as_server_user:
                msg += f"\n(the {_SERVER_USER!r} user must be able to reach {workdir})"
            raise StorageUnavailableError(msg)

    def _start_server(self) -> None:
        workdir = self._require_workdir()
        log = workdir / "server.log"
        for attempt in range(1, _START_ATTEMPTS + 1):
            port = _free_port()
            settings = (
                "listen_addresses=127.0.0.1",
                f"port={port}",
                f"unix_socket_directories={workdir}",
                *_SERVER_SETTINGS,
                *self._settings,  # the server takes the last value of a repeated setting
            )
            # pg_ctl hands -o to /bin/sh, hence the quoting.
            options = " ".join(f"-c {shlex.quote(setting)}" for setting in settings)
            result = self._run_tool(
                "pg_ctl",
                "-D",
                str(workdir / "data"),
                "-l",
                str(log),
                "-o",
                options,
                "-w",
                "-t",
                "60",
                "start",
            )
            if result.returncode == 0:
                self._port = port
                return
            tail = _tail(log)
            if attempt < _START_ATTEMPTS and "could not bind" in tail:
                logger.info("port=%d was taken, retrying on another port", port)
                continue
            msg = (
                f"PostgreSQL did not start on port {port}:\n{result.stdout.strip()}\n"
                f"--- tail of {log} ---\n{tail}"
            )
            raise StorageUnavailableError(msg)

    def _run_tool(self, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        bindir = self._bindir
        assert bindir is not None, "start() resolves the bindir first"  # noqa: S101 - invariant
        return _run([*self._as_server_user, str(bindir / tool), *args], cwd=self._workdir)

    def _require_workdir(self) -> Path:
        if self._workdir is None:
            msg = "ThrowawayPostgres is not running"
            raise StorageUnavailableError(msg)
        return self._workdir


def _server_user_prefix() -> list[str]:
    """Return the command prefix that drops root to the `postgres` user, or [] if not root."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam(_SERVER_USER)
    except KeyError:
        msg = f"running as root needs a {_SERVER_USER!r} system user for the server: {_ADVICE}"
        raise StorageUnavailableError(msg) from None
    runuser = shutil.which("runuser")
    if runuser is None:
        msg = f"running as root needs runuser (util-linux) to start PostgreSQL as {_SERVER_USER!r}"
        raise StorageUnavailableError(msg)
    return [runuser, "-u", _SERVER_USER, "--"]


def _run(argv: Sequence[str], *, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run a server tool with stdout and stderr merged; never raises on a non-zero exit."""
    # Children inherit no PG* variables, so the caller's PGDATA or PGPORT cannot interfere.
    env = {key: value for key, value in os.environ.items() if not key.startswith("PG")}
    return subprocess.run(  # noqa: S603 - argv is built here from fixed tool names
        list(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
        cwd=cwd,
        env=env,
        timeout=_COMMAND_TIMEOUT_S,
    )


def _copy_data(source: Path, target: Path) -> None:
    """Copy a data directory with its owners and modes, which the server checks at its start."""
    result = _run(["cp", "-a", str(source), str(target)])
    if result.returncode != 0:
        msg = f"cannot copy {source} to {target}:\n{result.stdout.strip()}"
        raise StorageUnavailableError(msg)


def _free_port() -> int:
    """Ask the kernel for a free loopback port (it may be taken again before we bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _parse_version(name: str) -> tuple[int, ...] | None:
    """Turn a directory name like "15" or "9.6" into a comparable version tuple."""
    try:
        return tuple(int(part) for part in name.split("."))
    except ValueError:
        return None


def _has_server_binaries(bindir: Path) -> bool:
    return (bindir / "initdb").is_file() and (bindir / "pg_ctl").is_file()


def _tail(log: Path) -> str:
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError as exc:
        return f"(no server log: {exc})"
    return "\n".join(lines[-_LOG_TAIL_LINES:])
