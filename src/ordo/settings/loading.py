"""Loading settings dataclasses from mappings, TOML files and ORDO_* environment variables.

Durations are `timedelta` in Python and integer milliseconds outside it, at most
LONGEST_DURATION, with `_ms` added to the key (`flush_interval_ms = 250`,
`ORDO_FLUSH_INTERVAL_MS=250`). A key's variable is ORDO_ and the key in capitals, unless its
class names another (`ENV_VARIABLES`): every variable means one setting of one class.
Integer settings take at most 2**53 - 1, unless they have a smaller maximum of their own.
Back-track periods also accept `max` and `off`; optional durations (`time_to_live_ms`) accept
`none` and `off`. Unknown keys and bad values raise ConfigurationError naming the key, and so
does a TOML value of another type than its setting's (`page_size = "7"`). Integers given as
text (ORDO_*) are plain ASCII digits with an optional minus (`ordo.arguments.integer_text`).
"""

from __future__ import annotations

import dataclasses
import sys
import tomllib
import typing
from collections.abc import Callable, Mapping
from datetime import timedelta
from enum import Enum
from functools import partial
from os import PathLike
from pathlib import Path
from typing import Any, ClassVar, Literal, Self, TypeVar, get_type_hints

from ordo import arguments
from ordo.arguments import INTEGER_FORM, LARGEST_INTEGER, integer_text
from ordo.documents import USER_TEXT_ENCODING, reject_unknown_keys
from ordo.errors import ConfigurationError

ENV_PREFIX = "ORDO_"

_E = TypeVar("_E", bound=Enum)

LONGEST_DURATION = timedelta(days=36_500)
"""The longest duration any setting takes: a hundred years (`longest_durations`).

Durations become thread waits (a refresh interval, a flush interval, a token claim interval),
which threading cannot do beyond threading.TIMEOUT_MAX (some 292 years), and times before or
after now (a consistency delay, a claim timeout, a time to live), which TimeUUIDs and datetimes
hold only from 1582 and up to year 9999. 2**53 - 1 ms, all an integer setting could be, went
past both, and failed far from the setting: an OffsetFormatError in a query's first read, an
OverflowError that ended a journal's flusher thread or a processor's threads.
"""
LONGEST_MS = LONGEST_DURATION // timedelta(milliseconds=1)
"""LONGEST_DURATION in ms: the bound of every duration given as a number of milliseconds (the
command line's options, `SimulationConfig.max_delay_ms`)."""

BackTrackPeriod = timedelta | Literal["max", "off"]
"""How far a back-track reaches: a duration, `max` (start of the previous bucket) or `off`."""


class LoadableSettings:
    """Mixin for frozen settings dataclasses: from_mapping(), from_env() and from_toml()."""

    __slots__ = ()
    TOML_TABLE: ClassVar[str]
    ENV_VARIABLES: ClassVar[Mapping[str, str]] = {}
    """Variables other than ORDO_ + KEY, by key: for a key another class's variable has."""

    @classmethod
    def from_mapping(cls, values: Mapping[str, object], *, source: str = "settings") -> Self:
        """Build from a mapping such as a TOML table (durations as `<name>_ms`).

        Anything but a mapping is a ConfigurationError (None was a TypeError from iterating it),
        and so is a value of another TOML type than its setting's (`_toml_typed`).
        """
        arguments.mapping(values, name="values", error=ConfigurationError)
        keys = _keys(cls)
        reject_unknown_keys(values, sorted(keys), where=source, error=ConfigurationError)
        for key, raw in values.items():
            _toml_typed(f"{source}.{key}", keys[key][1], raw)
        return cls._build(values, source=source, label=lambda key: f"{source}.{key}")

    @classmethod
    def or_default(cls, settings: object, *, name: str = "settings") -> Self:
        """`settings` when it is one of these, the defaults for None.

        Raises:
            ConfigurationError: `settings` is something else; the call that takes it is
                refused before it opens or writes anything (a misplaced argument used to fail
                with AttributeError only once used, after a journal file had been created).

        """
        if settings is None:
            return cls()
        if not isinstance(settings, cls):
            msg = f"{name} must be {cls.__name__} or None, got {type(settings).__name__}"
            raise ConfigurationError(msg)
        return settings

    @classmethod
    def env_variables(cls) -> dict[str, str]:
        """The variable from_env() reads for each key (`flush_interval_ms`), by key."""
        return {key: cls.ENV_VARIABLES.get(key, ENV_PREFIX + key.upper()) for key in _keys(cls)}

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Self:
        """Build from ORDO_-prefixed variables (e.g. ORDO_BUCKET_SIZE, ORDO_FLUSH_INTERVAL_MS).

        `environ` is a mapping such as `os.environ`: a text or a list was taken for an
        environment without variables (the defaults, whatever was meant), None for a TypeError.
        """
        arguments.mapping(environ, name="environ", error=ConfigurationError)
        variables = cls.env_variables()
        values = {key: environ[name] for key, name in variables.items() if name in environ}
        return cls._build(values, source="environment", label=variables.__getitem__)

    @classmethod
    def _build(
        cls, values: Mapping[str, object], *, source: str, label: Callable[[str], str]
    ) -> Self:
        """The settings of known `values`; errors name a value by `label(key)`."""
        keys = _keys(cls)
        kwargs = {
            keys[key][0]: _convert(label(key), keys[key][1], raw) for key, raw in values.items()
        }
        try:
            return cls(**kwargs)
        except ConfigurationError as exc:
            given = [key for key in values if keys[key][0] == exc.setting]
            msg = f"{label(given[0]) if given else source}: {exc}"
            raise ConfigurationError(msg, setting=exc.setting) from exc

    @classmethod
    def from_toml(cls, path: str | PathLike[str], *, table: str | None = None) -> Self:
        """Build from one table of a TOML file (the class's own by default).

        `path` may be a string as well as a Path, as `open()` takes: a string used to fail
        with AttributeError inside the reading, and anything else (None, bytes) with pathlib's
        TypeError. A `table` that is no name (5) was looked up in vain: the defaults, silently.
        """
        path = arguments.path(path, name="path", error=ConfigurationError)
        if table is not None and (not isinstance(table, str) or not table):
            msg = f"table must be a TOML table's name or None, got {table!r:.80}"
            raise ConfigurationError(msg)
        name = table or cls.TOML_TABLE
        document = read_toml(path, what="settings file")
        values = document.get(name, {})
        if not isinstance(values, dict):
            msg = f"{path}: [{name}] must be a table"
            raise ConfigurationError(msg)
        return cls.from_mapping(values, source=f"{path}:[{name}]")


def read_toml(path: Path, *, what: str) -> dict[str, Any]:
    """The TOML document in `path`; ConfigurationError naming the file (`what` it is) if not.

    A byte-order mark, which some editors put at the start of a UTF-8 file, is skipped:
    tomllib refused it as an invalid statement at line 1. Bytes that are not UTF-8 are a
    ConfigurationError too, not a UnicodeDecodeError's traceback, and so are arrays or tables
    nested deeper than tomllib reads (its RecursionError) and integers longer than Python
    converts (tomllib lets int()'s ValueError out, with advice for Python programmers).
    """
    try:
        return tomllib.loads(path.read_text(encoding=USER_TEXT_ENCODING))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        msg = f"cannot read {what} {path}: {exc}"
        raise ConfigurationError(msg) from exc
    except ValueError as exc:  # tomllib wraps every other ValueError in a TOMLDecodeError
        limit = sys.get_int_max_str_digits()
        msg = f"cannot read {what} {path}: integer too long (more than {limit:,} digits)"
        raise ConfigurationError(msg) from exc


def integer_in(name: str, value: int, minimum: int, maximum: int = LARGEST_INTEGER) -> None:
    """Raise ConfigurationError naming `name` unless `value` is an int in minimum..maximum.

    The check and its messages are `ordo.arguments.integer`'s, as for every other argument;
    the error names the setting, so that one loaded from the environment or a file names its
    variable or key too. Every integer setting has a maximum, LARGEST_INTEGER unless it has a
    smaller one of its own: a page size of 10**30 used to be accepted and fail at the first
    read, as SQLite's OverflowError, far from the variable that caused it.
    """
    error = partial(ConfigurationError, setting=name)
    arguments.integer(value, name=name, error=error, minimum=minimum, maximum=maximum)


def flag(name: str, value: bool) -> None:
    """Raise ConfigurationError naming `name` unless `value` is a bool.

    Any object has a truth value: `pubsub_notification="no"` would turn notifications on.
    """
    if not isinstance(value, bool):
        msg = f"{name} must be True or False, got {value!r}"
        raise ConfigurationError(msg, setting=name)


def enum_member(settings: object, name: str, kind: type[Enum]) -> None:
    """Make the field `name` of frozen `settings` a member of `kind` (see enum_value).

    Code compares these fields with `is`: a plain string was accepted and then ignored
    (`error_mode="skip"` failed the processor) or recorded as a journal's bucket size that no
    later open matched.
    """
    object.__setattr__(settings, name, enum_value(name, getattr(settings, name), kind))


def enum_value(name: str, value: object, kind: type[_E]) -> _E:
    """`value` as a member of `kind`: a member, or its value's text as TOML and ORDO_* give it.

    A text is read as the loaders read it (the enum's `parse`: case and surrounding spaces
    do not matter), so that a value works the same given in Python or in a file. Anything
    else, or a text that names no member, is a ConfigurationError naming `name` and listing
    the values.
    """
    if isinstance(value, kind):
        return value
    valid = ", ".join(str(member.value) for member in kind)
    if not isinstance(value, str):
        msg = f"{name} must be one of {kind.__name__}'s members or values ({valid}), got {value!r}"
        raise ConfigurationError(msg, setting=name)
    parse: Callable[[str], _E] = getattr(kind, "parse", kind)
    try:
        return parse(value)
    except ConfigurationError as exc:  # the enum's own message, listing the values
        msg = f"{name}: {exc}"
        raise ConfigurationError(msg, setting=name) from exc
    except ValueError as exc:  # an enum without `parse`
        msg = f"{name}: unknown value {value!r}; valid: {valid}"
        raise ConfigurationError(msg, setting=name) from exc


_NO_DURATION = ("none", "off", "")
"""What an optional duration (`time_to_live`) accepts for "no duration"."""


def _words(kind: Any) -> tuple[str, ...]:
    """The texts a duration setting of type `kind` takes besides milliseconds (none, max...)."""
    words: list[str] = []
    for alternative in typing.get_args(kind):
        if alternative is type(None):
            words += _NO_DURATION
        elif typing.get_origin(alternative) is Literal:
            words += typing.get_args(alternative)
    return tuple(words)


def _is_duration(kind: Any) -> bool:
    return kind is timedelta or timedelta in typing.get_args(kind)


_KEYS: dict[type, Mapping[str, tuple[str, Any]]] = {}
"""`_keys` of each class asked for: a class's fields do not change, and `get_type_hints`
evaluates every annotation anew (milliseconds for all the settings classes, which every `ordo`
command's check of its ORDO_* variables, `ordo.cli.environment`, reads)."""


def _keys(cls: type) -> Mapping[str, tuple[str, Any]]:
    """Map each external key (durations get `_ms`) to (field name, field type)."""
    keys = _KEYS.get(cls)
    if keys is None:
        hints = get_type_hints(cls)
        keys = _KEYS[cls] = {
            (f"{f.name}_ms" if _is_duration(hints[f.name]) else f.name): (f.name, hints[f.name])
            for f in dataclasses.fields(cls)
        }
    return keys


def _convert(key: str, kind: Any, raw: object) -> object:
    try:
        if _is_duration(kind):
            word = str(raw).strip().lower()
            if word in _words(kind):
                return None if type(None) in typing.get_args(kind) else word
            return _milliseconds(str(raw))
        if kind is bool:
            return _boolean(raw)
        if kind is int:
            if isinstance(raw, bool):
                raise TypeError(raw)
            return integer_text(str(raw))
        if isinstance(kind, type) and issubclass(kind, Enum):
            parse = getattr(kind, "parse", kind)
            return parse(str(raw))
        return str(raw)
    except ConfigurationError as exc:
        msg = f"{key}: {exc}"
        raise ConfigurationError(msg) from exc
    except (TypeError, ValueError) as exc:
        msg = f"{key}: {raw!r} is not {_expected(kind)}"
        raise ConfigurationError(msg) from exc


def _toml_typed(label: str, kind: Any, raw: object) -> None:
    """Raise ConfigurationError naming `label` unless `raw` has the TOML type of `kind`.

    A mapping's values are a TOML table's, which are typed: reading them as a variable's text
    took `page_size = "7"` and `pubsub_notification = 1` or `"yes"`, which the settings' own
    constructors refuse and every other reader of the file (the pipeline file's too) reads as a
    string or a number. A duration is an integer of milliseconds, or one of its words.
    """
    integer = isinstance(raw, int) and not isinstance(raw, bool)  # a TOML boolean is no number
    if _is_duration(kind):
        words = _words(kind)
        fits = integer or (isinstance(raw, str) and raw.strip().lower() in words)
        what = "a TOML integer of milliseconds"
        if words:
            what += f" or one of the strings {', '.join(map(repr, words))}"
    elif kind is bool:
        fits, what = isinstance(raw, bool), "a TOML boolean"
    elif kind is int:
        fits, what = integer, "a TOML integer"
    else:
        fits, what = isinstance(raw, str), "a TOML string"
    if not fits:
        msg = f"{label} must be {what}, got {raw!r:.80}"
        raise ConfigurationError(msg)


def _milliseconds(text: str) -> timedelta:
    """A duration of `text` whole milliseconds, within LARGEST_INTEGER either way.

    `timedelta` itself overflows only past 999,999,999 days, and a number that large is no
    more usable elsewhere: the bound is the one every integer option has. A number beyond it
    is too large, not "not a number" (OverflowError used to be reported as that).
    """
    milliseconds = integer_text(text)
    if abs(milliseconds) > LARGEST_INTEGER:
        msg = f"{text!r} is too large: a duration is at most {LARGEST_INTEGER} ms (2**53 - 1)"
        raise ConfigurationError(msg)
    return timedelta(milliseconds=milliseconds)


def _expected(kind: Any) -> str:
    """What a value of a settings field's type is, in words (for errors).

    A number's says how it is written (INTEGER_FORM): `'1_000' is not an integer` alone would
    leave the reader guessing what is.
    """
    if _is_duration(kind):
        words = ["none"] if type(None) in typing.get_args(kind) else list(_words(kind))
        return f"{' or '.join(['a whole number of milliseconds', *words])} ({INTEGER_FORM})"
    if kind is bool:
        return "true or false"
    if kind is int:
        return f"an integer ({INTEGER_FORM})"
    if isinstance(kind, type) and issubclass(kind, Enum):
        return f"one of {', '.join(str(member.value) for member in kind)}"
    return "usable here"


def _boolean(raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text not in {"true", "false", "on", "off", "1", "0", "yes", "no"}:
        raise ValueError(text)
    return text in {"true", "on", "1", "yes"}
