"""Tracking processors' settings (Axon's defaults for a tracking event processor)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from enum import StrEnum

from ordo.errors import ConfigurationError
from ordo.settings.durations import (
    at_least_a_millisecond,
    longest_durations,
    not_negative,
    positive,
)
from ordo.settings.loading import LoadableSettings, enum_member, integer_in


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
        """Read a mode name; ConfigurationError lists the valid ones.

        As `BucketSize.parse`: None, a number or bytes is no name either (an AttributeError or
        a TypeError before).
        """
        try:
            return cls(text.strip().lower().replace("-", "_"))
        except (ValueError, AttributeError, TypeError) as exc:
            valid = ", ".join(m.value for m in cls)
            msg = f"unknown error mode {text!r}; valid: {valid}"
            raise ConfigurationError(msg) from exc


MAX_THREADS = 1024
"""The most threads, and initial segments, a processor may ask for. A thread works one segment
at a time, claiming it, extending its claim and storing its token in transactions of its own:
a thousand in one process is a mistake, not a plan (the Spark source's `segments` stops there
too), and far more failed only at start, when the threads or the segments' rows ran out."""

MAX_RETRIES = 100
"""The most retries `max_retries` may ask for: every retry holds the batch's transaction open
while it waits (up to half the claim timeout each), so more than this is a handler that should
fail, not one that should be waited for."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ProcessorSettings(LoadableSettings):
    """How a tracking processor claims segments and handles events.

    Every duration is at most LONGEST_DURATION.
    """

    TOML_TABLE = "processor"

    thread_count: int = 1
    """Threads in this process (at most MAX_THREADS); each claims one segment at a time."""
    initial_segment_count: int = 1
    """Segments created the first time the processor starts (at most MAX_THREADS)."""
    batch_size: int = 100
    """Events handled per transaction; the token is stored after each batch. Keep batch_size
    times the handler's time per event well under claim_timeout (see there)."""
    claim_timeout: timedelta = timedelta(seconds=10)
    """A claim not extended for this long (at least 1 ms) may be taken by another owner. Claims
    are extended between batches, not inside one: a batch handled for longer than this outlives
    its claim (another owner may take the segment; on PostgreSQL the server ends the batch's
    idle transaction), which the worker logs at WARNING."""
    token_claim_interval: timedelta = timedelta(seconds=5)
    """How often an idle thread looks for an unclaimed segment (and claims are extended)."""
    error_mode: ErrorMode = ErrorMode.FAIL
    max_retries: int = 3
    """Attempts after the first before error_mode applies (at most MAX_RETRIES)."""
    retry_backoff: timedelta = timedelta(milliseconds=100)
    """The first retry waits this long; each further retry twice as long, at most half the
    claim_timeout (the batch's transaction stays open while it waits)."""

    @property
    def claim_timeout_ms(self) -> int:
        """claim_timeout in whole milliseconds (>= 1), as claims and idle limits are kept."""
        return self.claim_timeout // timedelta(milliseconds=1)

    def __post_init__(self) -> None:
        enum_member(self, "error_mode", ErrorMode)
        integer_in("thread_count", self.thread_count, 1, MAX_THREADS)
        integer_in("initial_segment_count", self.initial_segment_count, 1, MAX_THREADS)
        integer_in("batch_size", self.batch_size, 1)
        integer_in("max_retries", self.max_retries, 0, MAX_RETRIES)
        at_least_a_millisecond("claim_timeout", self.claim_timeout)
        positive("token_claim_interval", self.token_claim_interval)
        not_negative("retry_backoff", self.retry_backoff)
        longest_durations(self)
