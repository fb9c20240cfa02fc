"""The root `ordo` command: logging, the one error boundary, and the command groups."""

from __future__ import annotations

import logging
import sys
from typing import Any

import click

from ordo.cli.cdc import cdc
from ordo.cli.cleanup import cleanup
from ordo.cli.demo import demo
from ordo.cli.journal import append, events, info, init, tags
from ordo.cli.pipeline import pipeline
from ordo.cli.processors import processors
from ordo.cli.query import query
from ordo.cli.reconcile import reconcile
from ordo.cli.simulate import simulate_command
from ordo.cli.status import status
from ordo.cli.verify import verify
from ordo.errors import OrdoError


class OrdoGroup(click.Group):
    """Turns every OrdoError into one line on stderr and exit status 1."""

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; an OrdoError becomes a one-line message (traceback with --debug)."""
        try:
            return super().invoke(ctx)
        except OrdoError as exc:
            if ctx.find_root().params.get("debug"):
                raise
            msg = f"{type(exc).__name__}: {' '.join(str(exc).split())}"  # one line
            raise click.ClickException(msg) from exc


@click.group(cls=OrdoGroup)
@click.option(
    "--log-level",
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


for command in (init, append, events, tags, info, query, processors, pipeline, cdc, demo):
    cli.add_command(command)
cli.add_command(simulate_command, name="simulate")
for command in (reconcile, cleanup, verify, status):
    cli.add_command(command)


def main() -> None:
    """Entry point of the `ordo` console script."""
    cli(prog_name="ordo")
