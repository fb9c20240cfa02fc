"""Options shared by several commands, and how results are printed."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ordo.errors import ConfigurationError
from ordo.settings import EventsByTagSettings

F = TypeVar("F", bound=Callable[..., Any])


def journal_option(func: F) -> F:
    """--journal URL, also from ORDO_JOURNAL."""
    return click.option(
        "--journal",
        "journal_url",
        envvar="ORDO_JOURNAL",
        show_envvar=True,
        metavar="URL",
        help="Journal URL: sqlite:///path.db, a file path, or postgresql://...",
    )(func)


def json_option(func: F) -> F:
    """--json: one JSON document on stdout instead of text."""
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")(func)


def require_journal(url: str | None) -> str:
    """The journal URL, or a one-line error when neither --journal nor ORDO_JOURNAL is set."""
    if not url:
        msg = "no journal given: pass --journal URL or set ORDO_JOURNAL"
        raise ConfigurationError(msg)
    return url


def settings_from_env() -> EventsByTagSettings:
    """Events-by-tag settings from ORDO_* environment variables (defaults otherwise)."""
    return EventsByTagSettings.from_env(os.environ)


def print_json(document: object) -> None:
    """Write one JSON document to stdout."""
    click.echo(json.dumps(document, ensure_ascii=False, indent=2))
