"""Options, opening and rendering shared by the operations commands: reconcile, cleanup, verify.

Refusals (ActiveWriterError, TimeToLiveTooShortError) are OrdoErrors: the root group prints
them as one line with exit status 1, like every other error.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, TypeVar

import click

from ordo.cli.integer_range import IntegerRange
from ordo.cli.options import (
    existing_journal,
    int_option,
    journal_option,
    json_option,
    print_json,
)
from ordo.cli.variable_option import VariableOption
from ordo.settings import OperationsSettings
from ordo.settings.loading import LONGEST_MS
from ordo.settings.operations import (
    MAX_SPARK_KEY_PARTITIONS,
    SPARK_KEY_PARTITIONS,
    WRITER_LEASE_DEADLINE,
)
from ordo.storage.open import existing_stores_at, stores_at
from ordo.storage.stores import Stores
from ordo.tools.cleanup import ExpiryReceipt
from ordo.tools.operations_tool import OperationsTool
from ordo.tools.receipts import OperationReceipt
from ordo.types import Tag

F = TypeVar("F", bound=Callable[..., Any])
ToolT = TypeVar("ToolT", bound=OperationsTool)
_LEASE_DEADLINE_MS = WRITER_LEASE_DEADLINE // timedelta(milliseconds=1)


def dry_run_option(func: F) -> F:
    """--dry-run: report what would change and change nothing."""
    return click.option(
        "--dry-run", is_flag=True, help="Report what would change; change nothing."
    )(func)


def force_option(help_text: str) -> Callable[[F], F]:
    """--force: go on past what the command checks (`help_text` says what that is)."""
    return click.option("--force", is_flag=True, help=help_text)


def lease_timeout_option(func: F) -> F:
    """--writer-lease-timeout-ms, also from ORDO_WRITER_LEASE_TIMEOUT_MS."""
    return click.option(
        "--writer-lease-timeout-ms",
        "lease_timeout_ms",
        cls=VariableOption,
        # Not longer than a journal's lease deadline: a usage error naming the bound (exit 2),
        # as other numbers out of range are, rather than the settings' ConfigurationError.
        type=IntegerRange(min=_LEASE_DEADLINE_MS, min_open=True, max=LONGEST_MS),
        envvar="ORDO_WRITER_LEASE_TIMEOUT_MS",
        show_envvar=True,
        help=(
            "A writer whose lease is older than this is gone (default 30000; more than the "
            f"{_LEASE_DEADLINE_MS} ms a journal appends after its last renewal)."
        ),
    )(func)


@dataclass(frozen=True, slots=True, kw_only=True)
class OperationRequest:
    """What every operations command was asked: the journal, --json, --dry-run, --force.

    The options decorators (`change_options`, `guarded_options`) build it from the flags and
    pass it to the command as `request`; the journal and the settings are checked then, before
    the command does any work (a Spark job, a scan).
    """

    url: str
    """The journal URL (an existing journal)."""
    as_json: bool
    dry_run: bool
    force: bool
    settings: OperationsSettings
    """ORDO_* operations settings with --writer-lease-timeout-ms on top."""

    @contextmanager
    def tool(self, tool: type[ToolT]) -> Iterator[ToolT]:
        """`tool` (Reconciliation, Cleanup) on the journal, with the settings; closes after.

        A dry run opens the journal as the commands that only read do (`existing_stores_at`):
        it upgraded an older schema and switched an SQLite journal in rollback mode to WAL.
        """
        with self._opened() as stores:
            yield tool.of(stores, settings=self.settings)

    def check_journal(self) -> None:
        """Open the journal as `tool` does and close it, before a Spark job reads it.

        So that a dry run refuses an older schema (and a change upgrades it) before Spark
        starts, which takes seconds, rather than after.
        """
        with self._opened():
            pass

    def _opened(self) -> AbstractContextManager[Stores]:
        return existing_stores_at(self.url) if self.dry_run else stores_at(self.url)

    def render(self, receipt: OperationReceipt | ExpiryReceipt) -> None:
        """Print a receipt: one line, or one JSON document with --json."""
        if self.as_json:
            print_json(receipt.to_json_dict())
        else:
            click.echo(receipt.describe())


def change_options(force_help: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """--journal, --json, --dry-run and --force, passed to the command as one OperationRequest.

    `force_help` is --force's help: what the command checks and --force goes past (a help
    naming writer leases on a command that checks lagging processors misled).
    """

    def decorate(func: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(func)
        def command(
            journal_url: str | None, as_json: bool, dry_run: bool, force: bool, **rest: Any
        ) -> None:
            request = OperationRequest(
                url=existing_journal(journal_url),
                as_json=as_json,
                dry_run=dry_run,
                force=force,
                settings=operations_settings(rest.pop("lease_timeout_ms", None)),
            )
            func(request=request, **rest)

        for option in (force_option(force_help), dry_run_option, json_option, journal_option):
            command = option(command)
        return command

    return decorate


def guarded_options(func: Callable[..., None]) -> Callable[..., None]:
    """change_options and --writer-lease-timeout-ms: commands that the writer guard checks."""
    return change_options(
        "Go on although live writers hold leases (on the ids, or any for a truncate or rebuild "
        "--all)."
    )(lease_timeout_option(func))


def tag_option(help_text: str) -> Callable[[F], F]:
    """--tag TAG (None when not given): which tag an operation touches."""
    return click.option("--tag", callback=_to_tag, help=help_text)


def spark_partitions_option(help_text: str) -> Callable[[F], F]:
    """--partitions N: the pieces a Spark job reads the journal's keys in."""
    return int_option(
        "--partitions", SPARK_KEY_PARTITIONS, help_text, maximum=MAX_SPARK_KEY_PARTITIONS
    )


def _to_tag(_ctx: click.Context, _param: click.Parameter, value: str | None) -> Tag | None:
    return None if value is None else Tag(value)


def operations_settings(lease_timeout_ms: int | None) -> OperationsSettings:
    """Settings from ORDO_* variables, with --writer-lease-timeout-ms on top.

    The option's range is the settings' own (longer than a journal's lease deadline, below
    timedelta's limit), so the replaced settings are valid.
    """
    settings = OperationsSettings.from_env(os.environ)
    if lease_timeout_ms is None:
        return settings
    return replace(settings, writer_lease_timeout=timedelta(milliseconds=lease_timeout_ms))
