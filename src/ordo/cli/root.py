"""The root `ordo` command: logging, the one error boundary, and the command groups.

`ordo.cli.main` runs it, after importing it within the handling of a stop (Ctrl-C, SIGTERM).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import click

from ordo.cli.command_group import CommandGroup, as_typed
from ordo.cli.environment import warn_of_unread_variables
from ordo.cli.lazy_commands import LazyCommands
from ordo.cli.variable_option import VariableOption
from ordo.errors import BucketSizeMismatchError, OrdoError

COMMANDS = {
    **{name: f"ordo.cli.journal:{name}" for name in ("init", "append", "events", "tags", "info")},
    "query": "ordo.cli.query:query",
    "processors": "ordo.cli.processors:processors",
    "pipeline": "ordo.cli.pipeline:pipeline",
    "cdc": "ordo.cli.cdc:cdc",
    "demo": "ordo.cli.demo:demo",
    "simulate": "ordo.cli.simulate:simulate_command",
    "reconcile": "ordo.cli.reconcile:reconcile",
    "cleanup": "ordo.cli.cleanup:cleanup",
    "verify": "ordo.cli.verify:verify",
    "status": "ordo.cli.status:status",
    "spark": "ordo.cli.spark_archive:spark",
}
"""Each command of `ordo` and where it is: its module is imported when the command runs
(`LazyCommands`), so a command does not wait for the imports of all the others."""


class UsageLine(click.ClickException):
    """A usage error as one line (click prints usage, a hint and the error on four)."""

    exit_code = 2


def _usage_line(exc: click.UsageError) -> click.ClickException:
    """The error, the valid options or commands where it is about one, and where help is."""
    if isinstance(exc, click.exceptions.NoArgsIsHelpError):
        return exc  # `ordo` or `ordo cdc` alone: click shows the help
    if isinstance(exc, click.NoSuchOption):
        exc = as_typed(exc)
    message = exc.format_message().rstrip(".")
    ctx = exc.ctx
    if ctx is None:
        return UsageLine(message)
    if isinstance(exc, click.NoSuchOption) and not exc.possibilities:
        params = ctx.command.params
        names = sorted(name for p in params if isinstance(p, click.Option) for name in p.opts)
        message = f"{message} (valid: {', '.join([*names, '--help'])}){_after_dashes(ctx)}"
    elif isinstance(ctx.command, click.Group) and message.startswith("No such command"):
        message = f"{message} (valid: {', '.join(sorted(ctx.command.commands))})"
    return UsageLine(f"{message}; see '{ctx.command_path} --help'")


def _after_dashes(ctx: click.Context) -> str:
    """How to pass an argument that starts with "-" (`ordo events -1`), for a command with any.

    click takes such a word for an option ("No such option '-1'"), as getopt does, and the user
    who meant a persistence id, a tag or a file was not told that `--` ends the options.
    Negative numbers are arguments already where a command takes numbers (number_arguments).
    """
    arguments = [p for p in ctx.command.params if isinstance(p, click.Argument)]
    if not arguments:
        return ""
    pieces = [piece for p in arguments for piece in p.get_usage_pieces(ctx)]
    usage = " ".join([ctx.command_path, "[OPTIONS]", "--", *pieces])
    return f"; an argument that starts with - goes after --, as in '{usage}'"


class OrdoGroup(CommandGroup):
    """One line on stderr for every error: an OrdoError exits with 1, a usage error with 2."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """The root's own options; a usage error in them is one line."""
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            raise _usage_line(exc) from exc

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; an OrdoError becomes a one-line message (traceback with --debug).

        The line ends with the error's notes (PEP 678), each after "; ": what the command
        adds of its own to an error it did not make (`cdc simulate` names its run).
        """
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise _usage_line(exc) from exc
        except OrdoError as exc:
            if ctx.find_root().params.get("debug"):
                raise
            shown = exc
            if isinstance(exc, BucketSizeMismatchError) and not exc.advice:
                shown = exc.advised(f"set ORDO_BUCKET_SIZE to {exc.recorded}")  # the CLI's way
            text = "; ".join([str(shown), *getattr(exc, "__notes__", ())])  # what a caller added
            msg = f"{type(shown).__name__}: {' '.join(text.split())}"  # one line
            raise click.ClickException(msg) from exc


@click.group(cls=OrdoGroup, name="ordo", commands=LazyCommands(COMMANDS))
@click.option(
    "--log-level",
    cls=VariableOption,
    default="WARNING",
    show_default=True,
    envvar="ORDO_LOG_LEVEL",
    show_envvar=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    help="Log level of messages written to stderr.",
)
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.version_option(package_name="ordo")
def cli(log_level: str, debug: bool) -> None:
    """Ordered, resumable event pipelines: journal, events by tag, processors and CDC."""
    logging.basicConfig(
        level=log_level.upper(), stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    if not debug:
        # py4j logs the traceback of a failed Spark callback (a projection's batch) at ERROR;
        # the command reports the same failure in its one line (--debug shows both).
        logging.getLogger("py4j").setLevel(logging.CRITICAL)
        # psycopg's pool warns of each failed connection attempt while PostgreSQL is down; the
        # command says it once (a processor's or live query's WARNING) or fails in one line.
        logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    warn_of_unread_variables(cli, os.environ)
