"""The options of `ordo_events_by_tag`, parsed once into a frozen, picklable dataclass."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from ordo.arguments import LARGEST_INTEGER, integer_text
from ordo.documents import unknown_names_message
from ordo.errors import (
    BucketSizeMismatchError,
    ConfigurationError,
    FutureOffsetError,
    OffsetFormatError,
)
from ordo.journal import check_bucket_size, validation
from ordo.query.offset import refuse_future
from ordo.settings import EventsByTagSettings, QuerySettings
from ordo.settings.processor import MAX_THREADS
from ordo.storage.location import parse_location
from ordo.storage.open import existing_stores_at
from ordo.time import BucketSize, TimeUUID
from ordo.types import Tag

_DURATIONS = {
    "eventualconsistencydelayms": "eventual_consistency_delay",
    "gaptimeoutms": "gap_timeout",
    "backtrackintervalms": "back_track_interval",
    "backtrackperiodms": "back_track_period",
    "newpersistenceidscantimeoutms": "new_persistence_id_scan_timeout",
}
VALID_OPTIONS = (
    "journal",
    "tag",
    "startingOffsets",
    "maxEventsPerTrigger",
    "segments",
    "processor",
    "bucketSize",
    "firstTimeBucket",
    "pageSize",
    "eventualConsistencyDelayMs",
    "gapTimeoutMs",
    "backTrackIntervalMs",
    "backTrackPeriodMs",
    "newPersistenceIdScanTimeoutMs",
    "positionsOf",
    "positionsAt",
    "path",
)
"""camelCase, as Spark users expect; Spark hands them over lower-cased."""
_CAMEL_CASE = {name.lower(): name for name in VALID_OPTIONS}
"""An option's documented name by the lower-cased one Spark hands over."""
MAX_SEGMENTS = MAX_THREADS
"""The most input partitions `segments` may ask for: as many as a processor's first segments.
Each is a Spark task of every micro-batch with a database connection of its own (and each scans
the rows of the others, see docs/spark.md): more is a mistake, not a plan."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EventsByTagOptions:
    """What the source was asked for. Picklable: executors get a copy."""

    journal: str
    tag: Tag
    starting_offset: TimeUUID | None
    """None: earliest (the first time bucket)."""
    starts_at_latest: bool
    max_events_per_trigger: int | None
    segments: int
    processor: str | None
    events_by_tag: EventsByTagSettings
    query: QuerySettings
    positions_of: str | None = None
    """A processor whose processed positions the planner starts from (a projection's)."""
    positions_at: str | None = None
    """URL of the database holding them (a projection's sink); None: the journal."""

    @property
    def processor_name(self) -> str | None:
        """The processor the query runs for: the option processor, else positionsOf.

        Offsets record it, so that a checkpoint is not resumed by another processor's query.
        """
        return self.processor or self.positions_of

    @classmethod
    def from_spark(
        cls, options: Mapping[str, str], *, environ: Mapping[str, str] | None = None
    ) -> EventsByTagOptions:
        """Parse Spark's (case-insensitive) options; unknown ones list the valid ones.

        The events-by-tag settings (bucketSize, firstTimeBucket) default to the ORDO_*
        variables of `environ` (this process's environment by default), as the CLI's readers
        load them; explicit options win. They are resolved here, where the query is defined,
        and travel with the options: the executors do not look at their own environment.
        """
        given = {key.lower(): value for key, value in options.items()}
        unknown = [key for key in options if key.lower() not in _CAMEL_CASE]
        if unknown:
            raise ConfigurationError(  # Spark lower-cases names: say so, suggest the camelCase
                unknown_names_message(
                    unknown,
                    VALID_OPTIONS,
                    where="ordo_events_by_tag",
                    noun="option",
                    suggest=True,
                    note="option names are case-insensitive, and Spark hands them to the source "
                    "lower-cased",
                )
            )
        journal = given.get("journal") or given.get("path")
        if given.get("journal") and given.get("path") and given["journal"] != given["path"]:
            msg = (
                "ordo_events_by_tag: options journal and path name different journals "
                f"({given['journal']!r} and {given['path']!r}); path is journal's alias: give one"
            )
            raise ConfigurationError(msg)
        if not journal:
            msg = "ordo_events_by_tag needs the option journal (a journal URL)"
            raise ConfigurationError(msg)
        if "tag" not in given:
            msg = "ordo_events_by_tag needs the option tag"
            raise ConfigurationError(msg)
        starting = given.get("startingoffsets", "earliest").strip()
        events_by_tag = EventsByTagSettings.from_env(os.environ if environ is None else environ)
        if "bucketsize" in given:
            with _named("bucketsize"):
                events_by_tag = replace(
                    events_by_tag, bucket_size=BucketSize.parse(given["bucketsize"])
                )
        if "firsttimebucket" in given:
            with _named("firsttimebucket"):
                events_by_tag = replace(events_by_tag, first_time_bucket=given["firsttimebucket"])
        durations: dict[str, Any] = {
            name: timedelta(milliseconds=_int(given, key, 0))
            for key, name in _DURATIONS.items()
            if key in given
        }
        with _named():
            query = QuerySettings(page_size=_int(given, "pagesize", 5000), **durations)
        limit = (
            _int(given, "maxeventspertrigger", 1, minimum=1)
            if "maxeventspertrigger" in given
            else None
        )
        if "positionsat" in given and "positionsof" not in given:
            msg = "option positionsAt needs positionsOf (the processor whose positions it holds)"
            raise ConfigurationError(msg)
        parsed = cls(
            journal=journal,
            tag=validation.tag(given["tag"]),
            starting_offset=None
            if starting.lower() in ("earliest", "latest")
            else _starting_offset(starting),
            starts_at_latest=starting.lower() == "latest",
            max_events_per_trigger=limit,
            segments=_int(given, "segments", 1, minimum=1, maximum=MAX_SEGMENTS),
            processor=None  # checked here: planning failed on it once the query had started
            if "processor" not in given
            else validation.processor_name(given["processor"]),
            events_by_tag=events_by_tag,
            query=query,
            positions_of=None
            if "positionsof" not in given
            else validation.processor_name(given["positionsof"]),
            positions_at=None if "positionsat" not in given else _url(given["positionsat"]),
        )
        _check_journal(parsed)  # last: every option is checked even when the file is missing
        return parsed


_OPTION_OF_SETTING = {
    "page_size": "pageSize",
    **{setting: _CAMEL_CASE[key] for key, setting in _DURATIONS.items()},
}
"""The option that sets a QuerySettings field, for the field's errors."""


@contextmanager
def _named(key: str | None = None) -> Iterator[None]:
    """Put the option in front of a ConfigurationError of its value (`key`, lower-cased).

    Without `key`, the option is the one that sets the error's settings field, if any: the
    settings name their snake_case fields, which the source has no options of.
    """
    try:
        yield
    except ConfigurationError as exc:
        name = _CAMEL_CASE[key] if key is not None else _OPTION_OF_SETTING.get(exc.setting or "")
        if name is None:
            raise
        msg = f"option {name}: {exc}"
        raise ConfigurationError(msg, setting=exc.setting) from exc


def _check_journal(options: EventsByTagOptions) -> None:
    """The journal must exist, have the latest schema and the options' bucket size.

    Checked as the options are parsed (at `load()`, where the source's schema() parses them,
    and by `ordo pipeline run` before Spark starts), not only once the planner of a started
    query opens the journal.
    """
    with existing_stores_at(options.journal) as stores:
        recorded = stores.journal.recorded_bucket_size()
    check_source_bucket_size(recorded, options)


def check_source_bucket_size(recorded: str | None, options: EventsByTagOptions) -> None:
    """check_bucket_size, with an error that names the source's option (and variable).

    The source's bucket size is the option bucketSize, else ORDO_BUCKET_SIZE, else hour: the
    library's message named only `bucket_size`, which the source has no option of.
    """
    try:
        check_bucket_size(recorded, options.events_by_tag.bucket_size)
    except BucketSizeMismatchError as exc:
        advice = f"set the option bucketSize (or ORDO_BUCKET_SIZE) to {exc.recorded}"
        raise exc.advised(advice) from exc


def _starting_offset(text: str) -> TimeUUID:
    """The TimeUUID given as startingOffsets, which must not be in the future.

    Resuming after a future offset would skip every event written until then (a typo in a
    year). The query refuses it too, but only once Spark has started (and has written a
    checkpoint), naming the offset moved back by backTrackPeriodMs rather than the one given.
    """
    try:
        offset = TimeUUID.parse(text)
    except OffsetFormatError as exc:
        msg = f"option startingOffsets must be earliest, latest or a TimeUUID: {exc}"
        raise OffsetFormatError(msg) from exc
    try:
        refuse_future(offset, now_ns=time.time_ns())
    except FutureOffsetError as exc:
        msg = f"option startingOffsets: {exc}"
        raise FutureOffsetError(msg) from exc
    return offset


def _url(url: str) -> str:
    """A database URL ordo can open (the database itself may not exist yet)."""
    parse_location(url)
    return url


def _int(
    given: Mapping[str, str],
    key: str,
    default: int,
    *,
    minimum: int = 0,
    maximum: int = LARGEST_INTEGER,
) -> int:
    """The integer option `key` (lower-cased, as Spark hands it); errors say its camelCase name.

    Written as every integer setting is (`integer_text`): int() took `1_000`, `+5` and other
    scripts' digits here alone.
    """
    if key not in given:
        return default
    name = _CAMEL_CASE[key]
    try:
        value = integer_text(given[key])
    except ValueError as exc:
        msg = f"option {name} must be an integer, got {given[key]!r}"
        raise ConfigurationError(msg) from exc
    if not minimum <= value <= maximum:
        msg = f"option {name} must be in {minimum}..{maximum}, got {value}"
        raise ConfigurationError(msg)
    return value
