"""`ordo pipeline run CONFIG.toml`: a user's own projection on Spark, from a TOML file.

[pipeline]
journal = "sqlite:///shop.db"          # where the events are
tag = "order"                          # which tag to project
processor = "order-totals"             # names the positions (and segments) of the projection
handler = "myapp.projections:count"    # module:function(event, context), importable by workers
sink = "sqlite:///shop.db"             # where the handler writes (default: the journal)
checkpoint = ".ordo/checkpoints/order-totals"
segments = 4                           # input partitions (default 1)
trigger = "available_now"              # or a processing time such as "1 second"
dead_letters = false                   # keep failing events instead of failing the batch

[source]                               # more ordo_events_by_tag options, camelCase
eventualConsistencyDelayMs = 1000
"""

from __future__ import annotations

import importlib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from ordo.errors import ConfigurationError
from ordo.spark.projection import Handler, ProjectionSpec, projection

_KEYS = {
    "journal",
    "tag",
    "processor",
    "handler",
    "sink",
    "checkpoint",
    "segments",
    "trigger",
    "dead_letters",
}
_REQUIRED = ("journal", "tag", "processor", "handler", "checkpoint")


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
    trigger: str = "available_now"
    dead_letters: bool = False
    source: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_toml(cls, path: Path) -> PipelineConfig:
        """Read and check a pipeline file (the handler must import); errors name the key."""
        try:
            document = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            msg = f"cannot read pipeline file {path}: {exc}"
            raise ConfigurationError(msg) from exc
        table = document.get("pipeline")
        if not isinstance(table, dict):
            msg = f"{path}: a [pipeline] table is needed"
            raise ConfigurationError(msg)
        unknown = sorted(set(table) - _KEYS)
        if unknown:
            msg = f"{path}: unknown key(s) {', '.join(unknown)}; valid: {', '.join(sorted(_KEYS))}"
            raise ConfigurationError(msg)
        missing = [key for key in _REQUIRED if key not in table]
        if missing:
            msg = f"{path}: [pipeline] needs {', '.join(missing)}"
            raise ConfigurationError(msg)
        source = document.get("source", {})
        if not isinstance(source, dict):
            msg = f"{path}: [source] must be a table"
            raise ConfigurationError(msg)
        load_handler(str(table["handler"]))  # fail on reading, not once Spark has started
        return cls(
            journal=str(table["journal"]),
            tag=str(table["tag"]),
            processor=str(table["processor"]),
            handler=str(table["handler"]),
            sink=str(table.get("sink", table["journal"])),
            checkpoint=str(table["checkpoint"]),
            segments=int(table.get("segments", 1)),
            trigger=str(table.get("trigger", "available_now")),
            dead_letters=bool(table.get("dead_letters", False)),
            source={str(k): str(v) for k, v in source.items()},
        )


def load_handler(reference: str) -> Handler:
    """Import `module:function`; ConfigurationError when it cannot be found."""
    module_name, _, name = reference.partition(":")
    if not module_name or not name:
        msg = f"handler must look like module:function, got {reference!r}"
        raise ConfigurationError(msg)
    try:
        handler = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        msg = f"cannot import handler {reference!r}: {exc}"
        raise ConfigurationError(msg) from exc
    if not callable(handler):
        msg = f"handler {reference!r} is not callable"
        raise ConfigurationError(msg)
    return handler  # type: ignore[no-any-return]


def start_pipeline(spark: SparkSession, config: PipelineConfig) -> StreamingQuery:
    """Start the pipeline's streaming projection."""
    spec = ProjectionSpec(
        processor=config.processor,
        sink=config.sink,
        handler=load_handler(config.handler),
        dead_letters=config.dead_letters,
    )
    options = {
        **config.source,
        "journal": config.journal,
        "tag": config.tag,
        "processor": config.processor,
        "segments": str(config.segments),
    }
    is_available_now = config.trigger.replace("-", "_").lower() == "available_now"
    return projection(
        spark,
        spec,
        source_options=options,
        checkpoint=config.checkpoint,
        available_now=is_available_now,
        processing_time=None if is_available_now else config.trigger,
    )
