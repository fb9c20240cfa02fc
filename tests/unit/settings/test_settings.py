from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ordo import open_journal
from ordo.arguments import LARGEST_INTEGER
from ordo.errors import ConfigurationError
from ordo.settings import (
    CaptureSettings,
    ErrorMode,
    EventsByTagSettings,
    LoadableSettings,
    OperationsSettings,
    ProcessorSettings,
    QuerySettings,
)
from ordo.settings.loading import LONGEST_DURATION
from ordo.time import BucketSize


def test_defaults_follow_the_seed() -> None:
    settings = EventsByTagSettings()
    assert settings.bucket_size is BucketSize.HOUR
    assert settings.first_time_bucket == "20151120T00:00"
    assert settings.max_message_batch_size == 150
    assert settings.flush_interval == timedelta(milliseconds=250)
    assert settings.pubsub_notification is False


def test_from_env_reads_prefixed_keys_with_units() -> None:
    settings = EventsByTagSettings.from_env(
        {
            "ORDO_BUCKET_SIZE": "Minute",
            "ORDO_FLUSH_INTERVAL_MS": "0",
            "ORDO_MAX_MESSAGE_BATCH_SIZE": "10",
            "ORDO_PUBSUB_NOTIFICATION": "on",
            "UNRELATED": "x",
        }
    )
    assert settings.bucket_size is BucketSize.MINUTE
    assert settings.flush_interval == timedelta(0)
    assert settings.max_message_batch_size == 10
    assert settings.pubsub_notification is True


def test_from_toml_reads_one_table(tmp_path: Path) -> None:
    path = tmp_path / "ordo.toml"
    path.write_text(
        '[events_by_tag]\nbucket_size = "day"\nflush_interval_ms = 25\n'
        'first_time_bucket = "20260101T00:00"\n',
        encoding="utf-8",
    )
    settings = EventsByTagSettings.from_toml(path)
    assert settings.bucket_size is BucketSize.DAY
    assert settings.flush_interval == timedelta(milliseconds=25)
    assert settings.first_time_bucket_ms == 1767225600000


def test_from_toml_takes_a_string_path(tmp_path: Path) -> None:
    """As `open()` does: a str path was an AttributeError's traceback."""
    path = tmp_path / "ordo.toml"
    path.write_text('[events_by_tag]\nbucket_size = "day"\n', encoding="utf-8")
    assert EventsByTagSettings.from_toml(str(path)).bucket_size is BucketSize.DAY


@pytest.mark.parametrize(
    ("environ", "needle"),
    [
        ({"ORDO_BUCKET_SIZE": "week"}, "ORDO_BUCKET_SIZE: unknown bucket size 'week'"),
        (
            {"ORDO_FLUSH_INTERVAL_MS": "soon"},
            "ORDO_FLUSH_INTERVAL_MS: 'soon' is not a whole number of milliseconds",
        ),
        (
            {"ORDO_FLUSH_INTERVAL_MS": "99999999999999999999"},
            r"ORDO_FLUSH_INTERVAL_MS: '99999999999999999999' is too large: a duration is at most "
            r"9007199254740991 ms \(2\*\*53 - 1\)",
        ),
        (
            {"ORDO_FLUSH_INTERVAL_MS": "-99999999999999999999"},
            "ORDO_FLUSH_INTERVAL_MS: '-99999999999999999999' is too large",
        ),
        (
            {"ORDO_FLUSH_INTERVAL_MS": "-5"},
            "ORDO_FLUSH_INTERVAL_MS: flush_interval must be a duration >= 0, got -5 ms",
        ),
        ({"ORDO_MAX_MESSAGE_BATCH_SIZE": "0"}, "ORDO_MAX_MESSAGE_BATCH_SIZE: max_message_batch"),
        ({"ORDO_PUBSUB_NOTIFICATION": "maybe"}, "ORDO_PUBSUB_NOTIFICATION: 'maybe' is not true"),
        ({"ORDO_TIME_TO_LIVE_MS": "x"}, "'x' is not a whole number of milliseconds or none"),
        (  # it said "environment: first time bucket ...", naming no variable
            {"ORDO_FIRST_TIME_BUCKET": "2015-11-20"},
            "^ORDO_FIRST_TIME_BUCKET: first time bucket '2015-11-20' does not match ",
        ),
    ],
)
def test_bad_values_name_the_key(environ: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigurationError, match=needle):
        EventsByTagSettings.from_env(environ)


def test_unknown_toml_keys_are_listed_with_the_valid_ones(tmp_path: Path) -> None:
    path = tmp_path / "ordo.toml"
    path.write_text("[events_by_tag]\nbucket = 'day'\n", encoding="utf-8")
    with pytest.raises(
        ConfigurationError, match=r"has unknown key 'bucket' \(valid keys: bucket_size, "
    ):
        EventsByTagSettings.from_toml(path)


def test_an_unreadable_file_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read settings file"):
        EventsByTagSettings.from_toml(tmp_path / "missing.toml")
    latin = tmp_path / "latin.toml"
    latin.write_bytes("[events_by_tag]\nfirst_time_bucket = 'é'\n".encode("latin-1"))
    with pytest.raises(ConfigurationError, match=r"cannot read settings file .*latin\.toml"):
        EventsByTagSettings.from_toml(latin)  # was a UnicodeDecodeError


def test_a_file_that_starts_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    """Some editors start UTF-8 files with one: it was 'Invalid statement (at line 1)'."""
    path = tmp_path / "ordo.toml"
    path.write_text("\ufeff[events_by_tag]\nbucket_size = 'day'\n", encoding="utf-8")
    assert EventsByTagSettings.from_toml(path).bucket_size is BucketSize.DAY


def test_query_defaults_follow_the_seed() -> None:
    settings = QuerySettings()
    assert settings.eventual_consistency_delay == timedelta(seconds=5)
    assert settings.refresh_interval == timedelta(seconds=3)
    assert settings.gap_timeout == timedelta(seconds=10)
    assert settings.new_persistence_id_scan_timeout == timedelta(0)
    assert settings.max_missing_to_search == 5000
    assert settings.back_track_interval == timedelta(seconds=1)
    assert settings.back_track_period == timedelta(seconds=5)
    assert settings.back_track_long_interval == timedelta(seconds=120)
    assert settings.back_track_long_period == "max"


def test_back_track_periods_accept_max_off_and_milliseconds() -> None:
    settings = QuerySettings.from_env(
        {
            "ORDO_BACK_TRACK_PERIOD_MS": "max",
            "ORDO_BACK_TRACK_LONG_PERIOD_MS": "OFF",
            "ORDO_EVENTUAL_CONSISTENCY_DELAY_MS": "50",
        }
    )
    assert settings.back_track_period == "max"
    assert settings.back_track_long_period == "off"
    assert settings.eventual_consistency_delay == timedelta(milliseconds=50)
    assert QuerySettings.from_mapping({"back_track_period_ms": 800}).back_track_period == (
        timedelta(milliseconds=800)
    )


@pytest.mark.parametrize(
    ("values", "needle"),
    [
        ({"gap_timeout_ms": -1}, "gap_timeout"),
        ({"refresh_interval_ms": 0}, "refresh_interval"),
        ({"page_size": 0}, "page_size"),
        ({"back_track_period_ms": "off"}, "back_track_period cannot be off"),
        ({"back_track_period_ms": "sometimes"}, "back_track_period_ms"),
        (
            {"back_track_period_ms": 5000, "back_track_long_period_ms": 1000},
            "back_track_long_period .* must not be shorter than back_track_period",
        ),
        ({"cleanup_old_persistence_ids_ms": -5}, "cleanup_old_persistence_ids"),
        ({"cleanup_old_persistence_ids_ms": 0}, "cleanup_old_persistence_ids must be .* > 0"),
    ],
)
def test_bad_query_settings_name_the_setting(values: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigurationError, match=needle):
        QuerySettings.from_mapping(values)


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        (
            {"ORDO_BACK_TRACK_LONG_PERIOD_MS": "0"},
            "ORDO_BACK_TRACK_LONG_PERIOD_MS: back_track_long_period (0 ms) must not be shorter "
            "than back_track_period (5000 ms)",
        ),
        (
            {"ORDO_BACK_TRACK_PERIOD_MS": "max", "ORDO_BACK_TRACK_LONG_PERIOD_MS": "10"},
            "ORDO_BACK_TRACK_LONG_PERIOD_MS: back_track_long_period (10 ms) must not be shorter "
            "than back_track_period ('max')",
        ),
    ],
)
def test_back_track_periods_out_of_order_are_shown_in_milliseconds(
    environ: dict[str, str], message: str
) -> None:
    """As the variables give them and every other duration error shows them: it said
    `(0:00:00) must not be shorter than back_track_period (0:00:05)`."""
    with pytest.raises(ConfigurationError) as raised:
        QuerySettings.from_env(environ)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("values", "needle"),
    [
        ({"thread_count": -1}, "thread_count"),
        ({"thread_count": 0}, "thread_count"),
        ({"initial_segment_count": 0}, "initial_segment_count"),
        ({"batch_size": 0}, "batch_size"),
        ({"claim_timeout_ms": 0}, "claim_timeout"),
        ({"error_mode": "explode"}, "unknown error mode 'explode'; valid: fail, skip, dead_letter"),
        ({"max_retries": -1}, "max_retries"),
    ],
)
def test_bad_processor_settings_name_the_setting(values: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigurationError, match=needle):
        ProcessorSettings.from_mapping(values)


HUGE = str(10**30)
"""What a typo or a pasted byte count gives: it used to fail far away (SQLite's OverflowError)."""


@pytest.mark.parametrize(
    ("settings", "variable", "value", "largest"),
    [
        (EventsByTagSettings, "ORDO_MAX_MESSAGE_BATCH_SIZE", HUGE, "9007199254740991 (2**53 - 1)"),
        (QuerySettings, "ORDO_PAGE_SIZE", HUGE, "9007199254740991 (2**53 - 1)"),
        (QuerySettings, "ORDO_MAX_MISSING_TO_SEARCH", HUGE, "9007199254740991 (2**53 - 1)"),
        (OperationsSettings, "ORDO_ROWS_PER_BATCH", HUGE, "9007199254740991 (2**53 - 1)"),
        (CaptureSettings, "ORDO_MAX_CHANGES", HUGE, "9007199254740991 (2**53 - 1)"),
        (ProcessorSettings, "ORDO_BATCH_SIZE", HUGE, "9007199254740991 (2**53 - 1)"),
        (ProcessorSettings, "ORDO_THREAD_COUNT", "1025", "1024"),
        (ProcessorSettings, "ORDO_INITIAL_SEGMENT_COUNT", HUGE, "1024"),
        (ProcessorSettings, "ORDO_MAX_RETRIES", "101", "100"),
    ],
)
def test_an_integer_setting_beyond_its_maximum_is_too_large(
    settings: type[LoadableSettings], variable: str, value: str, largest: str
) -> None:
    name = variable.removeprefix("ORDO_").lower()
    problem = f"{variable}: {name} is too large: at most {largest}, got {value}"
    with pytest.raises(ConfigurationError, match=re.escape(problem)):
        settings.from_env({variable: value})
    maximum = largest.split()[0]
    assert getattr(settings.from_env({variable: maximum}), name) == int(maximum)


EVERY_SETTINGS: list[type[Any]] = [
    CaptureSettings,
    EventsByTagSettings,
    OperationsSettings,
    ProcessorSettings,
    QuerySettings,
]


DURATIONS = [
    pytest.param(settings, f.name, id=f"{settings.__name__}.{f.name}")
    for settings in EVERY_SETTINGS
    for f in dataclasses.fields(settings)
    if f.type.startswith(("timedelta", "BackTrackPeriod"))
]


@pytest.mark.parametrize(("settings", "name"), DURATIONS)
def test_every_duration_has_a_maximum(
    settings: type[LoadableSettings], name: str, tmp_path: Path
) -> None:
    """2**53 - 1 ms failed far from the setting: query offsets overflowed (an OffsetFormatError
    naming no setting), and waits that long ended threads with an OverflowError (a journal's
    flusher, a processor's workers, a capture's polling)."""
    longest = LONGEST_DURATION // timedelta(milliseconds=1)
    problem = f"{name} is too long: at most {longest} ms (36,500 days), got {LARGEST_INTEGER} ms"
    too_long: dict[str, Any] = {name: timedelta(milliseconds=LARGEST_INTEGER)}
    with pytest.raises(ConfigurationError, match=re.escape(problem)) as raised:
        settings(**too_long)
    assert raised.value.setting == name
    variable = settings.env_variables()[f"{name}_ms"]
    with pytest.raises(ConfigurationError, match=re.escape(f"{variable}: {problem}")):
        settings.from_env({variable: str(LARGEST_INTEGER)})
    path = tmp_path / "ordo.toml"
    table = settings.TOML_TABLE
    path.write_text(f"[{table}]\n{name}_ms = {LARGEST_INTEGER}\n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match=re.escape(f"[{table}].{name}_ms: {problem}")):
        settings.from_toml(path)
    assert getattr(settings.from_env({variable: str(longest)}), name) == LONGEST_DURATION


def _integer_fields(settings: type[LoadableSettings]) -> list[str]:
    fields = dataclasses.fields(settings)  # type: ignore[arg-type]
    integers = [f.name for f in fields if f.type == "int"]
    assert integers
    return integers


@pytest.mark.parametrize("settings", EVERY_SETTINGS)
def test_every_integer_setting_has_a_maximum(settings: type[LoadableSettings]) -> None:
    for name in _integer_fields(settings):
        with pytest.raises(ConfigurationError, match=f"{name} is too large"):
            settings.from_mapping({name: LARGEST_INTEGER + 1})


@pytest.mark.parametrize("value", [True, 2.0, "2"])
@pytest.mark.parametrize("settings", EVERY_SETTINGS)
def test_every_integer_setting_refuses_what_is_no_int(
    settings: type[LoadableSettings], value: object
) -> None:
    """The check is the API's (`ordo.arguments.integer`): True is not 1, and names the setting."""
    for name in _integer_fields(settings):
        problem = f"^{name} must be an integer, got {re.escape(repr(value))}$"
        with pytest.raises(ConfigurationError, match=problem) as raised:
            settings(**{name: value})
        assert raised.value.setting == name


def test_every_variable_is_one_setting_of_one_class() -> None:
    """ORDO_FLUSH_INTERVAL_MS was the tag writer's and the capture's: tuning one changed both."""
    variables = [
        (name, f"{settings.__name__}.{key}")
        for settings in EVERY_SETTINGS
        for key, name in settings.env_variables().items()
    ]
    readers: dict[str, list[str]] = {}
    for name, key in variables:
        readers.setdefault(name, []).append(key)
    assert {name: keys for name, keys in readers.items() if len(keys) > 1} == {}
    assert all(name.startswith("ORDO_") for name in readers)


def test_the_capture_and_the_tag_writer_each_read_their_own_flush_interval() -> None:
    """0 is the tag writer's "write each event at once"; the capture refused it, as its own."""
    environ = {"ORDO_FLUSH_INTERVAL_MS": "0", "ORDO_CDC_FLUSH_INTERVAL_MS": "40"}
    assert EventsByTagSettings.from_env(environ).flush_interval == timedelta(0)
    assert CaptureSettings.from_env(environ).flush_interval == timedelta(milliseconds=40)
    assert CaptureSettings.from_env({"ORDO_FLUSH_INTERVAL_MS": "0"}) == CaptureSettings()
    with pytest.raises(ConfigurationError) as raised:
        CaptureSettings.from_env({"ORDO_CDC_FLUSH_INTERVAL_MS": "0"})
    assert str(raised.value) == (
        "ORDO_CDC_FLUSH_INTERVAL_MS: flush_interval must be a duration > 0, got 0 ms"
    )
    assert raised.value.setting == "flush_interval"


def test_processor_settings_follow_axon_and_read_the_environment() -> None:
    assert ProcessorSettings().claim_timeout == timedelta(seconds=10)
    assert ProcessorSettings().token_claim_interval == timedelta(seconds=5)
    settings = ProcessorSettings.from_env(
        {"ORDO_THREAD_COUNT": "4", "ORDO_ERROR_MODE": "dead-letter", "ORDO_CLAIM_TIMEOUT_MS": "500"}
    )
    assert (settings.thread_count, settings.error_mode) == (4, ErrorMode.DEAD_LETTER)
    assert settings.claim_timeout == timedelta(milliseconds=500)


def test_enum_settings_take_their_members_or_value_texts() -> None:
    assert EventsByTagSettings(bucket_size="DAY").bucket_size is BucketSize.DAY  # type: ignore[arg-type]
    assert ProcessorSettings(error_mode="skip").error_mode is ErrorMode.SKIP  # type: ignore[arg-type]
    assert ProcessorSettings(error_mode=" Dead-Letter ").error_mode is ErrorMode.DEAD_LETTER  # type: ignore[arg-type]
    replaced = dataclasses.replace(ProcessorSettings(), error_mode="skip")  # type: ignore[arg-type]
    assert replaced.error_mode is ErrorMode.SKIP


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: ProcessorSettings(error_mode=3),  # type: ignore[arg-type]
            "error_mode must be one of ErrorMode's members or values (fail, skip, dead_letter), "
            "got 3",
        ),
        (
            lambda: ProcessorSettings(error_mode="bogus"),  # type: ignore[arg-type]
            "error_mode: unknown error mode 'bogus'; valid: fail, skip, dead_letter",
        ),
        (
            lambda: EventsByTagSettings(bucket_size=None),  # type: ignore[arg-type]
            "bucket_size must be one of BucketSize's members or values (minute, hour, day), "
            "got None",
        ),
        (
            lambda: EventsByTagSettings(bucket_size=ErrorMode.SKIP),  # type: ignore[arg-type]
            "bucket_size: unknown bucket size <ErrorMode.SKIP: 'skip'>; valid bucket sizes are: "
            "minute, hour, day",
        ),
    ],
)
def test_an_enum_setting_of_another_type_or_value_names_the_field_and_its_values(
    build: Callable[[], object], message: str
) -> None:
    """It said "must be a ErrorMode", and not that the values' texts are taken too."""
    with pytest.raises(ConfigurationError) as raised:
        build()
    assert str(raised.value) == message
    assert raised.value.setting == message.split(" ")[0].rstrip(":")


@pytest.mark.parametrize(
    ("build", "needle"),
    [
        (lambda: EventsByTagSettings(bucket_size="weird"), "bucket_size: unknown bucket size"),  # type: ignore[arg-type]
        (lambda: EventsByTagSettings(bucket_size=5), "bucket_size must be one of BucketSize's"),  # type: ignore[arg-type]
        (lambda: EventsByTagSettings(bucket_size=None), "bucket_size must be one of BucketSize's"),  # type: ignore[arg-type]
        (lambda: ProcessorSettings(error_mode="bogus"), "error_mode: unknown error mode"),  # type: ignore[arg-type]
        (lambda: EventsByTagSettings(pubsub_notification="no"), "must be True or False"),  # type: ignore[arg-type]
        (lambda: QuerySettings(refresh_interval=None), "refresh_interval must be a duration > 0"),  # type: ignore[arg-type]
    ],
)
def test_enum_settings_refuse_anything_else(build: Callable[[], object], needle: str) -> None:
    with pytest.raises(ConfigurationError, match=needle):
        build()


@pytest.mark.parametrize(
    "settings",
    [CaptureSettings, EventsByTagSettings, OperationsSettings, ProcessorSettings, QuerySettings],
)
def test_or_default_takes_its_class_or_none_and_refuses_the_rest(
    settings: type[LoadableSettings],
) -> None:
    given = settings()
    assert settings.or_default(given) is given
    assert settings.or_default(None) == settings()
    with pytest.raises(ConfigurationError, match=f"^x must be {settings.__name__} or None, got"):
        settings.or_default(QuerySettings() if settings is not QuerySettings else "fast", name="x")


def test_a_journal_with_settings_of_another_kind_is_refused_before_its_file_exists(
    tmp_path: Path,
) -> None:
    """An AttributeError came once the journal file had been created."""
    path = tmp_path / "j.db"
    with pytest.raises(ConfigurationError, match="settings must be EventsByTagSettings or None"):
        open_journal(f"sqlite:///{path}", settings=QuerySettings())  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("environ", [None, "ORDO_PAGE_SIZE=5", ["ORDO_PAGE_SIZE"], 5])
def test_from_env_refuses_what_is_no_mapping(environ: object) -> None:
    """A text or a list gave the defaults, as an environment without variables; None a TypeError."""
    with pytest.raises(ConfigurationError, match=r"^environ must be a mapping, got "):
        QuerySettings.from_env(environ)  # type: ignore[arg-type]


@pytest.mark.parametrize("values", [None, "page_size", 5])
def test_from_mapping_refuses_what_is_no_mapping(values: object) -> None:
    with pytest.raises(ConfigurationError, match=r"^values must be a mapping, got "):
        QuerySettings.from_mapping(values)  # type: ignore[arg-type]


@pytest.mark.parametrize("path", [None, b"ordo.toml", 5, "", "ordo\x00.toml"])
def test_from_toml_refuses_what_is_no_path(path: object) -> None:
    """pathlib's TypeError named no argument."""
    with pytest.raises(ConfigurationError, match=r"^path must be a file path"):
        QuerySettings.from_toml(path)  # type: ignore[arg-type]


@pytest.mark.parametrize("table", [5, b"query", ""])
def test_from_toml_refuses_a_table_that_is_no_name(tmp_path: Path, table: object) -> None:
    """A table of 5 was looked for in vain, and the defaults came back without a word."""
    path = tmp_path / "ordo.toml"
    path.write_text("[query]\npage_size = 7\n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match=r"^table must be a TOML table's name or None"):
        QuerySettings.from_toml(path, table=table)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [None, 1, b"skip"])
def test_error_mode_parse_refuses_what_is_not_text(value: object) -> None:
    """An AttributeError or a TypeError before; BucketSize.parse refused them already."""
    with pytest.raises(ConfigurationError, match=r"^unknown error mode "):
        ErrorMode.parse(value)  # type: ignore[arg-type]


NOT_PLAIN_INTEGERS = ["1_000", "+5", " 5", "5 ", "5\n", "\u0665", "\uff15", "0x10", "5.0", "-"]
"""Texts int() reads as numbers but no one writes as one (Arabic-Indic five, a fullwidth five,
digit groups, a sign, surrounding space), and texts it refuses: each is "not an integer"."""

INTEGER_VARIABLES = [
    pytest.param(settings, variable, id=variable)
    for settings in EVERY_SETTINGS
    for key, variable in settings.env_variables().items()
    if key.endswith("_ms") or key in _integer_fields(settings)
]


@pytest.mark.parametrize("text", NOT_PLAIN_INTEGERS)
@pytest.mark.parametrize(("settings", "variable"), INTEGER_VARIABLES)
def test_an_integer_variable_takes_only_plain_ascii_digits(
    settings: type[LoadableSettings], variable: str, text: str
) -> None:
    """int() took `1_000`, `+5`, ` 5 ` and other scripts' digits for numbers, while a shell, a
    TOML reader or a person reads them as something else or nothing: one variable, several
    meanings."""
    with pytest.raises(ConfigurationError, match=f"^{variable}: {re.escape(repr(text))} is not "):
        settings.from_env({variable: text})


@pytest.mark.parametrize(
    ("table", "line", "problem"),
    [
        ("query", 'page_size = "7"', "page_size must be a TOML integer, got '7'"),
        ("query", "page_size = true", "page_size must be a TOML integer, got True"),
        (
            "query",
            'gap_timeout_ms = "250"',
            "gap_timeout_ms must be a TOML integer of milliseconds, got '250'",
        ),
        (
            "events_by_tag",
            'time_to_live_ms = "86400000"',
            "time_to_live_ms must be a TOML integer of milliseconds or one of the strings "
            "'none', 'off', '', got '86400000'",
        ),
        (
            "events_by_tag",
            "pubsub_notification = 1",
            "pubsub_notification must be a TOML boolean, got 1",
        ),
        (
            "events_by_tag",
            'pubsub_notification = "yes"',
            "pubsub_notification must be a TOML boolean, got 'yes'",
        ),
        ("processor", "error_mode = 1", "error_mode must be a TOML string, got 1"),
    ],
)
def test_a_toml_value_of_another_type_than_its_settings_is_refused(
    tmp_path: Path, table: str, line: str, problem: str
) -> None:
    """A TOML file is typed, and the settings' constructors refuse "7" for a page size: a file
    took it, and 1 or "yes" for a boolean, where every other reader of the file (the pipeline
    file's, a TOML schema) sees a string or a number, not the setting's type."""
    settings = {s.TOML_TABLE: s for s in EVERY_SETTINGS}[table]
    path = tmp_path / "ordo.toml"
    path.write_text(f"[{table}]\n{line}\n", encoding="utf-8")
    with pytest.raises(ConfigurationError) as raised:
        settings.from_toml(path)
    assert str(raised.value) == f"{path}:[{table}].{problem}"


def test_a_claim_timeout_under_a_millisecond_is_refused() -> None:
    """Claims and idle limits are kept in whole milliseconds: it was 0 there, and every batch
    of a tracking processor failed (the token store refuses an idle limit of 0 ms)."""
    with pytest.raises(
        ConfigurationError, match=r"^claim_timeout must be at least 1 ms, got 0\.5 ms$"
    ) as raised:
        ProcessorSettings(claim_timeout=timedelta(microseconds=500))
    assert raised.value.setting == "claim_timeout"
