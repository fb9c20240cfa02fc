"""Options, opening and rendering shared by the operations commands: reconcile, cleanup, verify.

Refusals (ActiveWriterError, TimeToLiveTooShortError) are OrdoErrors: the root group prints
them as one line with exit status 1, like every other error.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from ordo.cli.options import existing_journal, journal_option, json_option, print_json
from ordo.settings import OperationsSettings
from ordo.storage.open import stores_at
from ordo.tools.cleanup import ExpiryReceipt
from ordo.tools.operations_tool import OperationsTool
from ordo.tools.receipts import OperationReceipt
from ordo.types import Tag

F = TypeVar("F", bound=Callable[..., Any])
ToolT = TypeVar("ToolT", bound=OperationsTool)


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


@dataclass(frozen=True, slots=True, kw_only=True)
class OperationRequest:
    """What every operations command was asked: the journal, --json, --dry-run, --force.

    The options decorators (`change_options`, `guarded_options`) build it from the flags and
    pass it to the command as `request`.
    """

    journal_url: str | None
    as_json: bool
    dry_run: bool
    force: bool
    lease_timeout_ms: int | None = None

    @property
    def url(self) -> str:
        """The journal URL; ConfigurationError when neither --journal nor ORDO_JOURNAL is set."""
        return existing_journal(self.journal_url)

    @property
    def settings(self) -> OperationsSettings:
        """ORDO_* operations settings with --writer-lease-timeout-ms on top."""
        return operations_settings(self.lease_timeout_ms)

    @contextmanager
    def tool(self, tool: type[ToolT]) -> Iterator[ToolT]:
        """`tool` (Reconciliation, Cleanup) on the journal, with the settings; closes after."""
        url, settings = self.url, self.settings
        with stores_at(url) as stores:
            yield tool.of(stores, settings=settings)

    def render(self, receipt: OperationReceipt | ExpiryReceipt) -> None:
        """Print a receipt: one line, or one JSON document with --json."""
        if self.as_json:
            print_json(receipt.to_json_dict())
        else:
            click.echo(receipt.describe())


def change_options(func: Callable[..., None]) -> Callable[..., None]:
    """--journal, --json, --dry-run and --force, passed to `func` as one OperationRequest."""

    @functools.wraps(func)
    def command(
        journal_url: str | None, as_json: bool, dry_run: bool, force: bool, **rest: Any
    ) -> None:
        lease_timeout_ms = rest.pop("lease_timeout_ms", None)
        request = OperationRequest(
            journal_url=journal_url,
            as_json=as_json,
            dry_run=dry_run,
            force=force,
            lease_timeout_ms=lease_timeout_ms,
        )
        func(request=request, **rest)

    for option in (force_option, dry_run_option, json_option, journal_option):
        command = option(command)
    return command


def guarded_options(func: Callable[..., None]) -> Callable[..., None]:
    """change_options and --writer-lease-timeout-ms: commands that the writer guard checks."""
    return change_options(lease_timeout_option(func))


def tag_option(help_text: str) -> Callable[[F], F]:
    """--tag TAG (None when not given): which tag an operation touches."""
    return click.option("--tag", callback=_to_tag, help=help_text)


def _to_tag(_ctx: click.Context, _param: click.Parameter, value: str | None) -> Tag | None:
    return None if value is None else Tag(value)


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
