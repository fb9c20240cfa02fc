"""Options and rendering shared by the operations commands: reconcile, cleanup, verify."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ordo.cli.options import print_json
from ordo.settings import OperationsSettings
from ordo.tools.cleanup import ExpiryReceipt
from ordo.tools.receipts import OperationReceipt

F = TypeVar("F", bound=Callable[..., Any])


def dry_run_option(func: F) -> F:
    """--dry-run: report what would change and change nothing."""
    return click.option(
        "--dry-run", is_flag=True, help="Report what would change; change nothing."
    )(func)


def force_option(func: F) -> F:
    """--force: go on although live writers (or lagging processors) would be affected."""
    return click.option(
        "--force",
        is_flag=True,
        help="Go on although live writers hold leases on the ids (or processors lag).",
    )(func)


def lease_timeout_option(func: F) -> F:
    """--writer-lease-timeout-ms, also from ORDO_WRITER_LEASE_TIMEOUT_MS."""
    return click.option(
        "--writer-lease-timeout-ms",
        "lease_timeout_ms",
        type=int,
        envvar="ORDO_WRITER_LEASE_TIMEOUT_MS",
        show_envvar=True,
        help="A writer whose lease is older than this is gone (default 30000).",
    )(func)


def operations_settings(lease_timeout_ms: int | None) -> OperationsSettings:
    """Settings from ORDO_* variables, with the lease timeout flag on top."""
    values: dict[str, str] = {
        key: value
        for key, value in os.environ.items()
        if key in ("ORDO_WRITER_LEASE_TIMEOUT_MS", "ORDO_ROWS_PER_BATCH")
    }
    if lease_timeout_ms is not None:
        values["ORDO_WRITER_LEASE_TIMEOUT_MS"] = str(lease_timeout_ms)
    return OperationsSettings.from_env(values)


def progress(message: str) -> None:
    """Progress of long work goes to stderr, so stdout stays one result."""
    click.echo(message, err=True)


def render(receipt: OperationReceipt | ExpiryReceipt, *, as_json: bool) -> None:
    """Print a receipt: one line, or one JSON document."""
    if as_json:
        print_json(receipt.to_json_dict())
    else:
        click.echo(receipt.describe())
