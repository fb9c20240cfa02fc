"""The command line run in-process, and the journals and pipeline files its tests start from."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from ordo import open_journal
from ordo.cli.root import cli


def run(runner: CliRunner, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    """`ordo *args` with `stdin` as its input: its exit code, stdout and stderr."""
    result = runner.invoke(cli, list(args), input=stdin)
    return result.exit_code, result.stdout, result.stderr


def spark_command(
    *args: str, spark_log: Path, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`ordo *args` in a process of its own, Spark's output to `spark_log` (ORDO_SPARK_LOG).

    For what a command does when Spark does not start, or in another working directory `cwd`
    (relative paths of executors too): in this process, the first Spark session is the tests'
    shared one, and a command would reuse it.
    """
    return subprocess.run(
        [sys.executable, "-m", "ordo.cli.main", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "ORDO_SPARK_LOG": str(spark_log)},
        cwd=cwd,
        check=False,
    )


def fill_pipe(write_end: int) -> None:
    """Fill the pipe of `write_end` with newlines: a command's next write to it waits for a read.

    A command whose stderr it is then holds still at its next line, in the middle of its work,
    until the test reads: a stop sent then comes during that work however slow the test is.
    """
    os.set_blocking(write_end, False)
    for chunk in (b"\n" * 4096, b"\n"):  # pages, then the bytes left
        with contextlib.suppress(BlockingIOError):
            while True:
                os.write(write_end, chunk)
    os.set_blocking(write_end, True)  # the command's writes wait rather than fail


def journal_with_one_event(runner: CliRunner, tmp_path: Path) -> str:
    """A new SQLite journal holding one event of persistence id "o"."""
    url = f"sqlite:///{tmp_path}/j.db"
    stdin = '{"persistence_id": "o", "payload": 0}'
    assert run(runner, "append", "--journal", url, stdin=stdin)[0] == 0
    return url


def pipeline_file(tmp_path: Path, extra: str, *, checkpoint: str | None = None) -> Path:
    """A pipeline file for an existing, empty journal, with `extra` after its required keys."""
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    open_journal(url).close()
    config = tmp_path / "pipeline.toml"
    config.write_text(
        f'[pipeline]\njournal = "{url}"\ntag = "order"\nprocessor = "totals"\n'
        'handler = "ordo.spark.demo:count_order_events"\n'
        f'checkpoint = "{checkpoint or tmp_path / "checkpoint"}"\n{extra}',
        encoding="utf-8",
    )
    return config
