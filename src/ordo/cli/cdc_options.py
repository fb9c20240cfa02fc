"""Options the `ordo cdc` commands share: the change log, its partitions, a source's lag.

`ordo status` takes the change log and source options too, so they live apart from the commands.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from ordo.arguments import LARGEST_INTEGER
from ordo.cli.integer_range import IntegerRange
from ordo.cli.variable_option import VariableOption
from ordo.errors import ConfigurationError
from ordo.storage.change_sources import DEFAULT_SLOT
from ordo.storage.file_errors import require_nameable

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_CHANGE_LOG = ".ordo/changelog"


def change_log_option(func: F) -> F:
    """--change-log DIR, also from ORDO_CDC_CHANGE_LOG."""
    return click.option(
        "--change-log",
        "change_log",
        cls=VariableOption,
        default=DEFAULT_CHANGE_LOG,
        show_default=True,
        envvar="ORDO_CDC_CHANGE_LOG",
        show_envvar=True,
        type=click.Path(file_okay=False, path_type=Path),
        help="Root directory of the partitioned Parquet change logs (one per table).",
    )(func)


def require_named_change_log(change_log: Path) -> None:
    """Refuse a change log directory the user named (option or variable) that is not there.

    A command that only reads would show a misspelt --change-log as "no change logs", as if
    nothing were captured yet; the default directory may well not exist yet (no capture ran),
    so only a named one is checked. `ordo cdc materialize` refuses a missing one as well.
    """
    source = click.get_current_context().get_parameter_source("change_log")
    if source in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP):
        return
    # a folder above it this process may not search, a link loop: not a missing log
    require_nameable(change_log, doing=f"cannot read change log {change_log}")
    if not change_log.is_dir():
        named = "ORDO_CDC_CHANGE_LOG" if source is ParameterSource.ENVIRONMENT else "--change-log"
        msg = f"no change log directory {change_log}: check {named}"
        raise ConfigurationError(msg)


partitions_option = click.option(
    "--partitions",
    type=IntegerRange(min=1, max=LARGEST_INTEGER),
    default=None,
    help=(
        "Partitions of each table's change log, fixed by its first publish (another count is "
        "refused).  [default: the log's own count; 8 for a new log]"
    ),
)
"""--partitions: None when not given, so that the publisher follows each table's log."""


def source_status_options(func: F) -> F:
    """--source URL, --table and --slot: a CDC source whose lag a status shows."""
    func = click.option(
        "--slot", default=DEFAULT_SLOT, show_default=True, help="PostgreSQL slot of --source."
    )(func)
    func = click.option("--table", "tables", multiple=True, help="Captured tables of --source.")(
        func
    )
    return click.option(
        "--source", "source_url", default=None, help="Also show this CDC source's capture lag."
    )(func)
