"""Tracking processors' settings (Axon's defaults for a tracking event processor)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from enum import StrEnum

from ordo.errors import ConfigurationError
from ordo.settings.loading import (
    LoadableSettings,
    at_least,
    enum_member,
    not_negative,
    positive,
)


class ErrorMode(StrEnum):
    """What a processing group does with an event its handler keeps failing on."""

    FAIL = "fail"
    """Stop processing: the segment is released and the processor reports the error."""
    SKIP = "skip"
    """Log it and go on."""
    DEAD_LETTER = "dead_letter"
    """Keep it in the dead-letter table, with the error, and go on."""

    @classmethod
    def parse(cls, text: str) -> ErrorMode:
        """Read a mode name; ConfigurationError lists the valid ones."""
        try:
            return cls(text.strip().lower().replace("-", "_"))
        except ValueError as exc:
            valid = ", ".join(m.value for m in cls)
            msg = f"unknown error mode {text!r}; valid: {valid}"
            raise ConfigurationError(msg) from exc


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ProcessorSettings(LoadableSettings):
    """How a tracking processor claims segments and handles events."""

    TOML_TABLE = "processor"

    thread_count: int = 1
    """Threads in this process; each claims one segment at a time."""
    initial_segment_count: int = 1
    """Segments created the first time the processor starts."""
    batch_size: int = 100
    """Events handled per transaction; the token is stored after each batch."""
    claim_timeout: timedelta = timedelta(seconds=10)
    """A claim not extended for this long may be taken by another owner."""
    token_claim_interval: timedelta = timedelta(seconds=5)
    """How often an idle thread looks for an unclaimed segment (and claims are extended)."""
    error_mode: ErrorMode = ErrorMode.FAIL
    max_retries: int = 3
    """Attempts after the first before error_mode applies."""
    retry_backoff: timedelta = timedelta(milliseconds=100)
    """The first retry waits this long; each further retry twice as long."""

    def __post_init__(self) -> None:
        enum_member(self, "error_mode", ErrorMode)
        at_least("thread_count", self.thread_count, 1)
        at_least("initial_segment_count", self.initial_segment_count, 1)
        at_least("batch_size", self.batch_size, 1)
        at_least("max_retries", self.max_retries, 0)
        positive("claim_timeout", self.claim_timeout)
        positive("token_claim_interval", self.token_claim_interval)
        not_negative("retry_backoff", self.retry_backoff)
