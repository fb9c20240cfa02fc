"""Checks of duration settings, and how their errors show a duration (in milliseconds).

A duration is a `timedelta` in Python and integer milliseconds outside it (settings.loading).
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import TYPE_CHECKING

from ordo.errors import ConfigurationError
from ordo.settings.loading import LONGEST_DURATION

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


def positive(name: str, value: timedelta) -> None:
    """Raise ConfigurationError naming `name` unless `value` is a duration > 0."""
    if not isinstance(value, timedelta) or value <= timedelta(0):
        msg = f"{name} must be a duration > 0, got {shown(value)}"
        raise ConfigurationError(msg, setting=name)


def at_least_a_millisecond(name: str, value: timedelta) -> None:
    """Raise ConfigurationError naming `name` unless `value` is a duration >= 1 ms.

    For what is kept in whole milliseconds: a claim timeout under one was 0 in the token store
    and in PostgreSQL's idle limit of a batch's transaction, and every batch failed (the store
    refuses an idle limit of 0 ms, which PostgreSQL would take for none).
    """
    positive(name, value)
    if value < timedelta(milliseconds=1):
        msg = f"{name} must be at least 1 ms, got {value / timedelta(milliseconds=1)} ms"
        raise ConfigurationError(msg, setting=name)


def at_most(name: str, value: timedelta, longest: timedelta) -> None:
    """Raise ConfigurationError naming `name` when the duration `value` is longer than `longest`."""
    if value > longest:
        limit = f"{shown(longest)} ({longest.days:,} days)"
        msg = f"{name} is too long: at most {limit}, got {shown(value)}"
        raise ConfigurationError(msg, setting=name)


def longest_durations(settings: DataclassInstance) -> None:
    """Raise ConfigurationError naming the first duration of `settings` beyond LONGEST_DURATION.

    Every field holding a `timedelta` is checked, so a duration added later is bounded too.
    """
    for field in dataclasses.fields(settings):
        value = getattr(settings, field.name)
        if isinstance(value, timedelta):
            at_most(field.name, value, LONGEST_DURATION)


def not_negative(name: str, value: timedelta) -> None:
    """Raise ConfigurationError naming `name` unless `value` is a duration >= 0."""
    if not isinstance(value, timedelta) or value < timedelta(0):
        msg = f"{name} must be a duration >= 0, got {shown(value)}"
        raise ConfigurationError(msg, setting=name)


def shown(value: object) -> str:
    """A setting's value as an error shows it: durations in milliseconds.

    Durations are given in milliseconds outside Python, and -1 ms would print as
    `timedelta(days=-1, seconds=86399, microseconds=999000)`.
    """
    if isinstance(value, timedelta):
        return f"{value // timedelta(milliseconds=1)} ms"
    return repr(value)
