"""Settings: one frozen dataclass per concern, validated on creation, loadable from TOML and env.

Names and defaults follow the seeds (Akka Persistence Cassandra's `events-by-tag` block) in
snake_case. Durations are `timedelta` in Python; in TOML files and environment variables they
are integer milliseconds with `_ms` added to the name (`flush_interval_ms = 250`,
`ORDO_FLUSH_INTERVAL_MS=250`).
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping
from datetime import timedelta
from enum import Enum
from pathlib import Path
from typing import Self, TypeVar, get_type_hints

from ordo.errors import ConfigurationError
from ordo.time import DEFAULT_FIRST_TIME_BUCKET, BucketSize, parse_first_time_bucket

ENV_PREFIX = "ORDO_"
T = TypeVar("T")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EventsByTagSettings:
    """How tagged events are bucketed and written (seed 000 "events-by-tag" settings)."""

    bucket_size: BucketSize = BucketSize.HOUR
    """minute / hour / day; fixed once a journal has data."""
    first_time_bucket: str = DEFAULT_FIRST_TIME_BUCKET
    """Where a query without offset starts ("yyyyMMddTHH:mm", UTC): set it to your go-live day."""
    max_message_batch_size: int = 150
    """Rows per tag_views write."""
    flush_interval: timedelta = timedelta(milliseconds=250)
    """Longest a tagged event waits in the tag writer; 0 writes each event at once."""
    pubsub_notification: bool = False
    """Notify queries of tag writes so they read at once instead of at the next refresh."""

    def __post_init__(self) -> None:
        parse_first_time_bucket(self.first_time_bucket)
        _at_least("max_message_batch_size", self.max_message_batch_size, 1)
        _not_negative("flush_interval", self.flush_interval)

    @property
    def first_time_bucket_ms(self) -> int:
        """first_time_bucket as epoch milliseconds."""
        return parse_first_time_bucket(self.first_time_bucket)

    @classmethod
    def from_mapping(cls, values: Mapping[str, object], *, source: str = "settings") -> Self:
        """Build from a mapping such as a TOML table (durations as `<name>_ms`)."""
        return _from_mapping(cls, values, source=source)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Self:
        """Build from ORDO_-prefixed variables (e.g. ORDO_BUCKET_SIZE, ORDO_FLUSH_INTERVAL_MS)."""
        return _from_env(cls, environ)

    @classmethod
    def from_toml(cls, path: Path, *, table: str = "events_by_tag") -> Self:
        """Build from one table of a TOML file; unknown keys are errors."""
        return _from_toml(cls, path, table=table)


def _at_least(name: str, value: int, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        msg = f"{name} must be an integer >= {minimum}, got {value!r}"
        raise ConfigurationError(msg)


def _not_negative(name: str, value: timedelta) -> None:
    if not isinstance(value, timedelta) or value < timedelta(0):
        msg = f"{name} must be a duration >= 0, got {value!r}"
        raise ConfigurationError(msg)


def _keys(cls: type) -> dict[str, tuple[str, type]]:
    """Map each external key (durations get `_ms`) to (field name, field type)."""
    hints = get_type_hints(cls)
    keys: dict[str, tuple[str, type]] = {}
    for f in dataclasses.fields(cls):
        kind = hints[f.name]
        keys[f"{f.name}_ms" if kind is timedelta else f.name] = (f.name, kind)
    return keys


def _convert(key: str, kind: type, raw: object) -> object:
    try:
        if kind is timedelta:
            return timedelta(milliseconds=int(str(raw)))
        if kind is bool:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text not in {"true", "false", "on", "off", "1", "0", "yes", "no"}:
                raise ValueError(text)
            return text in {"true", "on", "1", "yes"}
        if kind is int:
            if isinstance(raw, bool):
                raise TypeError(raw)
            return int(str(raw))
        if issubclass(kind, Enum):
            parse = getattr(kind, "parse", kind)
            return parse(str(raw))
        return str(raw)
    except ConfigurationError as exc:
        msg = f"{key}: {exc}"
        raise ConfigurationError(msg) from exc
    except (TypeError, ValueError) as exc:
        msg = f"{key}: cannot use {raw!r} as {kind.__name__}"
        raise ConfigurationError(msg) from exc


def _from_mapping(cls: type[T], values: Mapping[str, object], *, source: str) -> T:
    keys = _keys(cls)
    unknown = sorted(set(values) - set(keys))
    if unknown:
        msg = f"{source}: unknown key(s) {', '.join(unknown)}; valid: {', '.join(sorted(keys))}"
        raise ConfigurationError(msg)
    kwargs = {
        keys[key][0]: _convert(f"{source}.{key}", keys[key][1], raw) for key, raw in values.items()
    }
    try:
        return cls(**kwargs)
    except ConfigurationError as exc:
        msg = f"{source}: {exc}"
        raise ConfigurationError(msg) from exc


def _from_env(cls: type[T], environ: Mapping[str, str]) -> T:
    wanted = {f"{ENV_PREFIX}{key.upper()}": key for key in _keys(cls)}
    values = {key: environ[name] for name, key in wanted.items() if name in environ}
    return _from_mapping(cls, values, source="environment ORDO_*")


def _from_toml(cls: type[T], path: Path, *, table: str) -> T:
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        msg = f"cannot read settings file {path}: {exc}"
        raise ConfigurationError(msg) from exc
    values = document.get(table, {})
    if not isinstance(values, dict):
        msg = f"{path}: [{table}] must be a table"
        raise ConfigurationError(msg)
    return _from_mapping(cls, values, source=f"{path}:[{table}]")
