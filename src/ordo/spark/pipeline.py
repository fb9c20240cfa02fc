"""`ordo pipeline run CONFIG.toml`: a user's own projection on Spark, from a TOML file.

[pipeline]
journal = "sqlite:///shop.db"          # where the events are
tag = "order"                          # which tag to project
processor = "order-totals"             # names the positions (and segments) of the projection
handler = "myapp.projections:count"    # module:function(event, context), importable by workers
sink = "sqlite:///shop.db"             # where the handler writes (default: the journal)
checkpoint = ".ordo/checkpoints/order-totals"
segments = 4                           # the processor's first segments (default 1, at most 1024)
trigger = "available_now"              # or a processing time such as "1 second"
dead_letters = false                   # keep failing events instead of failing the batch

[source]                               # more ordo_events_by_tag options, camelCase
eventualConsistencyDelayMs = 1000

Every value is checked, with its TOML type, before Spark starts: a mistake is then one line
naming the key, not a failed query after Spark's start-up (or, for `segments = 0`, a run that
processed nothing and wrote a checkpoint). So are the handler (it imports and takes (event,
context)), the journal (it exists, and records the bucket size the source asks for, if any)
and the sink (a known scheme; an SQLite file in an existing folder, as a misspelt one would
silently become a new database; an existing one can be read), and a local checkpoint location
(its nearest existing part must be a folder that can be written in; one that holds batches must
be of the same tag, processor and journal). Relative paths are the
working directory's, as Spark's are. The claim timeout comes from ORDO_CLAIM_TIMEOUT_MS, as for
the `ordo processors` commands, and is checked too.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from ordo.documents import reject_unknown_keys
from ordo.errors import ConfigurationError, InvalidIdentifierError
from ordo.journal import validation
from ordo.processing.handler import require_handler
from ordo.settings import EventsByTagSettings, ProcessorSettings
from ordo.settings.loading import integer_in, read_toml
from ordo.spark.options import MAX_SEGMENTS, EventsByTagOptions
from ordo.spark.pipeline_locations import check_checkpoint, check_sink
from ordo.spark.projection import Handler, ProjectionSpec, projection, require_checkpoint_of

_T = TypeVar("_T", str, int, bool)

_TABLES = ("pipeline", "source")
_KEYS = (
    "journal",
    "tag",
    "processor",
    "handler",
    "sink",
    "checkpoint",
    "segments",
    "trigger",
    "dead_letters",
)
_REQUIRED = ("journal", "tag", "processor", "handler", "checkpoint")
_TOML_TYPES = {str: "a non-empty string", int: "an integer", bool: "a boolean (true or false)"}
_SET_BY_PIPELINE = ("journal", "path", "tag", "processor", "segments")
"""ordo_events_by_tag options that [pipeline] sets (path is journal's alias): [source] setting
them too would be silently overridden."""

AVAILABLE_NOW = "available_now"
_AMOUNT = r"\d+\s+(?:week|day|hour|minute|millisecond|microsecond)s?|\d+(?:\.\d+)?\s+seconds?"
_PROCESSING_TIME = re.compile(rf"(?:interval\s+)?(?:{_AMOUNT})(?:\s+(?:{_AMOUNT}))*", re.IGNORECASE)
"""The intervals Spark takes as a processingTime trigger, without signs: Spark parses them only
once it has started, and rejects months and years (and a negative total) even then. Only seconds
may have a fraction."""
_AMOUNT_OF_UNIT = re.compile(r"(\d+(?:\.\d+)?)\s+([a-z]+?)s?\b", re.IGNORECASE)
"""Each amount of a processing time that _PROCESSING_TIME matched: the number and its unit."""
_MICROSECONDS = {
    "week": 604_800_000_000,
    "day": 86_400_000_000,
    "hour": 3_600_000_000,
    "minute": 60_000_000,
    "second": 1_000_000,
    "millisecond": 1_000,
    "microsecond": 1,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class PipelineConfig:
    """A projection pipeline, as read from its TOML file."""

    journal: str
    tag: str
    processor: str
    handler: str
    sink: str
    checkpoint: str
    segments: int = 1
    trigger: str = AVAILABLE_NOW
    """AVAILABLE_NOW or a processing-time interval."""
    dead_letters: bool = False
    source: dict[str, str] = field(default_factory=dict)
    from_environment: dict[str, str] = field(default_factory=dict)
    """bucketSize and firstTimeBucket from ORDO_* variables (or their defaults) where [source]
    does not set them: resolved by the command, given to the source as options, so Spark's
    processes (whose environment may differ) read with the settings that were checked."""
    claim_timeout: timedelta = ProcessorSettings().claim_timeout
    """ORDO_CLAIM_TIMEOUT_MS (or its default), as the `ordo processors` commands read it: when a
    tracking processor's claim on one of the projection's segments has expired, and how long a
    task's batch transaction may sit idle (ProjectionSpec.claim_timeout). The default was used
    whatever the variable said."""

    @classmethod
    def from_toml(cls, path: Path) -> PipelineConfig:
        """Read and check a pipeline file (the handler must import); errors name the key."""
        document = read_toml(path, what="pipeline file")
        reject_unknown_keys(
            document, _TABLES, where=str(path), error=ConfigurationError, noun="table"
        )
        table = document.get("pipeline")
        if not isinstance(table, dict):
            msg = f"{path}: a [pipeline] table is needed"
            raise ConfigurationError(msg)
        reject_unknown_keys(table, _KEYS, where=f"{path} [pipeline]", error=ConfigurationError)
        missing = [key for key in _REQUIRED if key not in table]
        if missing:
            msg = f"{path}: [pipeline] needs {', '.join(missing)}"
            raise ConfigurationError(msg)
        segments = _typed(path, table, "segments", int, 1)
        if not 1 <= segments <= MAX_SEGMENTS:
            msg = f"{path}: [pipeline] segments must be in 1..{MAX_SEGMENTS}, got {segments}"
            raise ConfigurationError(msg)
        handler = _typed(path, table, "handler", str)
        load_handler(handler)  # fail on reading, not once Spark has started
        journal = _typed(path, table, "journal", str)
        source = _source(path, document.get("source", {}))
        config = cls(
            journal=journal,
            tag=_typed(path, table, "tag", str),
            processor=_processor(path, _typed(path, table, "processor", str)),
            handler=handler,
            sink=_typed(path, table, "sink", str, journal),
            checkpoint=_typed(path, table, "checkpoint", str),
            segments=segments,
            trigger=_trigger(path, _typed(path, table, "trigger", str, AVAILABLE_NOW)),
            dead_letters=_typed(path, table, "dead_letters", bool, False),
            source=source,
            from_environment=_from_environment(source),
            claim_timeout=ProcessorSettings.from_env(os.environ).claim_timeout,
        )
        # The source's own parser, as Spark would run it: unknown or bad [source] options, and
        # a journal that does not exist (its check comes last), are errors before Spark starts.
        options = EventsByTagOptions.from_spark(config.source_options())
        # After the journal's check: the sink defaults to it.
        check_sink(path, config.sink, config.journal)
        check_checkpoint(path, config.checkpoint)
        require_checkpoint_of(options, config.checkpoint)  # another tag's, processor's, journal's
        return config

    def source_options(self) -> dict[str, str]:
        """ordo_events_by_tag's options: [source]'s and those [pipeline] sets."""
        return {
            **self.from_environment,
            **self.source,
            "journal": self.journal,
            "tag": self.tag,
            "processor": self.processor,
            "segments": str(self.segments),
        }


def _typed(
    path: Path, table: Mapping[str, Any], key: str, kind: type[_T], default: _T | None = None
) -> _T:
    """[pipeline]'s `key`, which must have the TOML type `kind`.

    No conversion: str("false") and int(2.7) would turn a mistake into a different setting.
    """
    value = table.get(key, default)
    # type() too, as a TOML boolean is a Python int; str(): a blank string names nothing.
    if isinstance(value, kind) and type(value) is kind and str(value).strip():
        return value
    msg = f"{path}: [pipeline] {key} must be {_TOML_TYPES[kind]}, got {value!r}"
    raise ConfigurationError(msg)


def _processor(path: Path, processor: str) -> str:
    """[pipeline] processor, which must be a processor name (it keys the token store's rows).

    Checked only by the source once Spark had started (or not at all: the job's log file is
    named after it, and a name longer than a file name failed there, blaming ORDO_SPARK_LOG).
    """
    try:
        return validation.processor_name(processor)
    except InvalidIdentifierError as exc:
        msg = f"{path}: [pipeline] processor: {exc}"
        raise ConfigurationError(msg) from exc


def _trigger(path: Path, trigger: str) -> str:
    """AVAILABLE_NOW (in any case, with - or _), else the processing-time interval as given.

    An interval longer than 2**53 - 1 ms (every integer setting's bound, some 285,000 years) is
    refused: Spark's own limit is not far beyond, and it found a longer one only once it had
    started (an arithmetic overflow of its interval parser).
    """
    text = trigger.strip()
    if text.replace("-", "_").lower() == AVAILABLE_NOW:
        return AVAILABLE_NOW
    if _PROCESSING_TIME.fullmatch(text):
        microseconds = sum(
            Decimal(amount) * _MICROSECONDS[unit.lower()]
            for amount, unit in _AMOUNT_OF_UNIT.findall(text)
        )
        integer_in(
            f"{path}: [pipeline] trigger {trigger!r} in milliseconds", int(microseconds) // 1000, 0
        )
        return trigger
    msg = (
        f"{path}: [pipeline] trigger must be {AVAILABLE_NOW!r} or a processing time such as "
        f"'1 second' or '1 minute 30 seconds', got {trigger!r}"
    )
    raise ConfigurationError(msg)


def _source(path: Path, source: object) -> dict[str, str]:
    """[source]'s options as Spark hands them over: strings, from TOML strings or integers."""
    if not isinstance(source, dict):
        msg = f"{path}: [source] must be a table"
        raise ConfigurationError(msg)
    taken = sorted(key for key in source if key.lower() in _SET_BY_PIPELINE)
    if taken:
        msg = (
            f"{path}: [source] cannot set {', '.join(taken)}: "
            "[pipeline] sets the journal, tag, processor and segments"
        )
        raise ConfigurationError(msg)
    for key, value in source.items():
        if type(value) not in (str, int):
            msg = f"{path}: [source] {key} must be a string or an integer, got {value!r}"
            raise ConfigurationError(msg)
    return {key: str(value) for key, value in source.items()}


def _from_environment(source: Mapping[str, str]) -> dict[str, str]:
    """The source's events-by-tag options from ORDO_* variables, unless [source] sets them."""
    settings = EventsByTagSettings.from_env(os.environ)
    resolved = {
        "bucketSize": settings.bucket_size.value,
        "firstTimeBucket": settings.first_time_bucket,
    }
    given = {key.lower() for key in source}
    return {key: value for key, value in resolved.items() if key.lower() not in given}


def load_handler(reference: str) -> Handler:
    """Import `module:function`; ConfigurationError when it cannot be called as a handler.

    A module that exits as it is imported (a script's argument parsing, `sys.exit()`) ended
    the command with that status and no message. A callable that does not take (event,
    context) failed every event only once Spark ran it: with dead_letters, the run succeeded
    with every event in the dead-letter table and applied. One whose call runs nothing (an
    `async def`, a generator function) recorded every event as applied.
    """
    module_name, _, name = reference.partition(":")
    if not module_name or not name:
        msg = f"handler must look like module:function, got {reference!r}"
        raise ConfigurationError(msg)
    try:
        handler = getattr(importlib.import_module(module_name), name)
    except (Exception, SystemExit) as exc:  # the user's module: any error of it is a bad setting
        msg = f"cannot import handler {reference!r}: {type(exc).__name__}: {exc}"
        raise ConfigurationError(msg) from exc
    if not callable(handler):
        msg = f"handler {reference!r} is not callable"
        raise ConfigurationError(msg)
    require_handler(handler, name=repr(reference))  # an `async def` handled no event
    try:
        inspect.signature(handler).bind(None, None)
    except ValueError:
        pass  # no signature to look at (some built-ins): the call will tell
    except TypeError as exc:
        msg = f"handler {reference!r} cannot be called with (event, context): {exc}"
        raise ConfigurationError(msg) from exc
    return handler  # type: ignore[no-any-return]


def projection_spec(config: PipelineConfig) -> ProjectionSpec:
    """What the pipeline's projection runs: its handler (imported), sink and settings."""
    return ProjectionSpec(
        processor=config.processor,
        sink=config.sink,
        handler=load_handler(config.handler),
        dead_letters=config.dead_letters,
        claim_timeout=config.claim_timeout,
    )


def start_pipeline(spark: SparkSession, config: PipelineConfig) -> StreamingQuery:
    """Start the pipeline's streaming projection."""
    spec = projection_spec(config)
    is_available_now = config.trigger == AVAILABLE_NOW
    return projection(
        spark,
        spec,
        source_options=config.source_options(),
        checkpoint=config.checkpoint,
        available_now=is_available_now,
        processing_time=None if is_available_now else config.trigger,
    )
