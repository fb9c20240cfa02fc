"""Offsets and options of `ordo_events_by_tag`, without a Spark session."""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path

import pytest

from ordo import EventsByTagSettings, NewEvent, open_journal
from ordo.errors import (
    BucketSizeMismatchError,
    CheckpointMismatchError,
    ConfigurationError,
    FutureOffsetError,
    InvalidIdentifierError,
    OffsetFormatError,
    SchemaVersionError,
    StorageUnavailableError,
)
from ordo.spark.offsets import EventsByTagOffset
from ordo.spark.operations_source import KeysOptions
from ordo.spark.options import EventsByTagOptions
from ordo.spark.planner import EventsByTagPlanner
from ordo.storage.open import init_storage
from ordo.time import BucketSize, TimeUUID
from sqlite_support import LATEST, older_journal, stored_version

JOURNAL_A = "0b3e9a3c-5f4d-4e8a-9c1b-2a7d6e5f4c3b"
JOURNAL_B = "9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a"


def test_offsets_round_trip_through_json() -> None:
    offset = EventsByTagOffset(
        position="11f1",
        lo="10",
        hi="11f1",
        pids={"a": [1, 3]},
        segments=[[0, 1], [1, 1]],
        tag="order",
    )
    assert EventsByTagOffset.from_json_dict(offset.to_json_dict()) == offset


def test_an_offset_round_trips_its_journal_id_and_one_without_reads_as_none() -> None:
    offset = EventsByTagOffset(position="11f1", tag="order", journal_id=JOURNAL_A)
    assert offset.to_json_dict()["journal_id"] == JOURNAL_A
    assert EventsByTagOffset.from_json_dict(offset.to_json_dict()) == offset
    older = {"v": 1, "position": "11f1", "lo": "", "hi": "", "pids": {}, "tag": "order"}
    assert EventsByTagOffset.from_json_dict(older).journal_id is None
    with pytest.raises(OffsetFormatError, match="not an events-by-tag offset"):
        EventsByTagOffset.from_json_dict({**older, "journal_id": 7})


def test_an_offset_of_another_journal_is_refused_naming_both_ids() -> None:
    """Offsets named no journal: a checkpoint resumed on another journal of the same tag went
    on after the first one's position and skipped every event of its own before it."""
    offset = EventsByTagOffset(position="11f1", tag="order", journal_id=JOURNAL_A)
    with pytest.raises(CheckpointMismatchError) as raised:
        offset.check_journal(JOURNAL_B, url="sqlite:///b.db")
    assert (raised.value.what, raised.value.checkpointed, raised.value.requested) == (
        "journal",
        JOURNAL_A,
        JOURNAL_B,
    )
    assert str(raised.value) == (
        f"the checkpoint was written by a query of journal='{JOURNAL_A}', this query's journal "
        f"is '{JOURNAL_B}' (the id of sqlite:///b.db): give it a checkpointLocation of its own"
    )
    offset.check_journal(JOURNAL_A, url="sqlite:///a.db")
    offset.check_journal(None, url="sqlite:///older.db")  # a journal of schema 7 has no id
    EventsByTagOffset(position="11f1", tag="order").check_journal(JOURNAL_B, url="x")


def test_an_offset_of_another_tag_is_refused_and_one_without_a_tag_accepted() -> None:
    with pytest.raises(CheckpointMismatchError) as raised:
        EventsByTagOffset(position="11f1", tag="order").check_query("invoice", None)
    assert (raised.value.checkpointed, raised.value.requested) == ("order", "invoice")
    older = {"v": 1, "position": "11f1", "lo": "", "hi": "", "pids": {}}  # before tags were kept
    EventsByTagOffset.from_json_dict(older).check_query("invoice", "totals")


def test_an_offset_of_another_processor_is_refused() -> None:
    """Only two different names are: a query may start or stop naming its processor."""
    offset = EventsByTagOffset(position="11f1", tag="order", processor="totals")
    assert EventsByTagOffset.from_json_dict(offset.to_json_dict()) == offset
    with pytest.raises(CheckpointMismatchError) as raised:
        offset.check_query("order", "other")
    assert (raised.value.what, raised.value.checkpointed, raised.value.requested) == (
        "processor",
        "totals",
        "other",
    )
    offset.check_query("order", "totals")
    offset.check_query("order", None)
    EventsByTagOffset(position="11f1", tag="order").check_query("order", "other")


@pytest.mark.parametrize(
    ("document", "needle"),
    [
        ({"v": 2, "position": ""}, "version 2"),
        ({"position": ""}, "version None"),
        ({"v": 1, "position": ""}, "not an events-by-tag offset"),
        ({"v": 1, "position": "", "lo": "", "hi": "", "pids": "x"}, "not an events-by-tag offset"),
    ],
)
def test_a_checkpoint_of_another_format_is_refused(
    document: dict[str, object], needle: str
) -> None:
    with pytest.raises(OffsetFormatError, match=needle):
        EventsByTagOffset.from_json_dict(document)


def test_options_are_case_insensitive_and_typed(tmp_path: Path) -> None:
    init_storage(f"sqlite:///{tmp_path}/x.db")
    options = EventsByTagOptions.from_spark(
        {
            "journal": f"{tmp_path}/x.db",
            "tag": "order",
            "maxeventspertrigger": "50",
            "SEGMENTS": "4",
            "eventualConsistencyDelayMs": "250",
            "startingOffsets": "latest",
        }
    )
    assert (options.max_events_per_trigger, options.segments) == (50, 4)
    assert options.query.eventual_consistency_delay.total_seconds() == 0.25
    assert options.starts_at_latest


@pytest.mark.parametrize(
    ("given", "error", "needle"),
    [
        (
            {"journal": "x.db", "tag": "t", "colour": "blue"},
            ConfigurationError,
            "valid options: journal",
        ),
        ({"tag": "t"}, ConfigurationError, "needs the option journal"),
        ({"journal": "x.db"}, ConfigurationError, "needs the option tag"),
        ({"journal": "x.db", "tag": ""}, InvalidIdentifierError, "tag must not be empty"),
        (
            {"journal": "x.db", "tag": "t", "processor": ""},
            InvalidIdentifierError,
            "processor name must not be empty",
        ),
        (
            {"journal": "x.db", "tag": "t", "processor": "p" * 256},
            InvalidIdentifierError,
            "processor name is 256 characters long",
        ),
        ({"journal": "x.db", "tag": "t", "segments": "-1"}, ConfigurationError, "segments"),
        ({"journal": "x.db", "tag": "t", "segments": "0"}, ConfigurationError, "segments must"),
        (
            {"journal": "x.db", "tag": "t", "segments": "1025"},
            ConfigurationError,
            "segments must be in 1..1024, got 1025",
        ),
        (
            {"journal": "x.db", "tag": "t", "maxEventsPerTrigger": "0"},
            ConfigurationError,
            "option maxEventsPerTrigger must be in 1..",
        ),
        (
            {"journal": "x.db", "tag": "t", "gapTimeoutMs": str(10**20)},
            ConfigurationError,
            "option gapTimeoutMs must be in 0..",
        ),
        (
            {"journal": "x.db", "tag": "t", "pageSize": "many"},
            ConfigurationError,
            "option pageSize must be an integer, got 'many'",
        ),
        *(
            (
                {"journal": "x.db", "tag": "t", "pageSize": written},
                ConfigurationError,
                f"option pageSize must be an integer, got {re.escape(repr(written))}",
            )
            for written in ("1_000", "+5", " 5", "\u0665", "\uff15")
        ),
        (
            {"journal": "x.db", "tag": "t", "pageSize": "0"},
            ConfigurationError,
            "option pageSize: page_size must be an integer >= 1, got 0",
        ),
        (
            {"journal": "x.db", "tag": "t", "bucketSize": "week"},
            ConfigurationError,
            "option bucketSize: unknown bucket size 'week'",
        ),
        (
            {"journal": "x.db", "path": "y.db", "tag": "t"},
            ConfigurationError,
            r"options journal and path name different journals \('x.db' and 'y.db'\)",
        ),
        (
            {"journal": "x.db", "tag": "t", "startingOffsets": "yesterday"},
            OffsetFormatError,
            "option startingOffsets must be earliest, latest or a TimeUUID: 'yesterday' is not",
        ),
        ({"journal": "sqlite:///no/such.db", "tag": "t"}, StorageUnavailableError, "no journal"),
    ],
)
def test_bad_options_are_refused_with_the_reason(
    given: dict[str, str], error: type[Exception], needle: str
) -> None:
    with pytest.raises(error, match=needle):
        EventsByTagOptions.from_spark(given)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "ordo_journal_keys needs the option journal (a journal URL)"),
        (
            {"journal": "j.db", "partition": "2"},
            "ordo_journal_keys has unknown option 'partition' (did you mean partitions?) "
            "(valid options: journal, partitions)",
        ),
        *(
            (
                {"journal": "j.db", "partitions": given},
                "ordo_journal_keys: option partitions must be an integer in 1..1024, "
                f"got {given!r}",
            )
            for given in ("0", "-2", "1025", "four", "", "1_0", "+4", "\u0664")
        ),
    ],
)
def test_the_key_sources_refuse_bad_options_naming_them(
    options: dict[str, str], message: str
) -> None:
    """partitions=0 used to be read as 1, a billion as a billion bound queries, and a misspelt
    option gave "options ['partition']: valid are journal, partitions"."""
    with pytest.raises(ConfigurationError) as refused:
        KeysOptions.from_spark("ordo_journal_keys", options)
    assert str(refused.value) == message


def test_the_key_sources_take_options_in_any_case() -> None:
    assert KeysOptions.from_spark("s", {"JOURNAL": "j.db", "Partitions": "7"}) == KeysOptions(
        journal="j.db", partitions=7
    )
    assert KeysOptions.from_spark("s", {"journal": "j.db"}).partitions == 4


def test_a_source_with_another_bucket_size_than_the_journal_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/x.db"
    init_storage(url)
    given = {"journal": url, "tag": "order", "bucketSize": "day"}
    options = EventsByTagOptions.from_spark(given)  # nothing written yet: any size will do
    with open_journal(url) as journal:  # hourly buckets, the default
        journal.append("p", [NewEvent.of(1, tags=["order"])])

    with pytest.raises(BucketSizeMismatchError) as raised:
        EventsByTagOptions.from_spark(given)
    assert (raised.value.recorded, raised.value.requested) == ("hour", "day")
    with pytest.raises(BucketSizeMismatchError):  # a query defined before the journal was written
        EventsByTagPlanner(options, resume_after="", now_ns=time.time_ns())


def test_an_older_journal_is_refused_by_the_source_not_upgraded(tmp_path: Path) -> None:
    current, older = f"sqlite:///{tmp_path}/current.db", tmp_path / "older.db"
    init_storage(current)
    options = EventsByTagOptions.from_spark({"journal": current, "tag": "order"})
    older_journal(older)

    with pytest.raises(SchemaVersionError, match="run `ordo init`"):
        EventsByTagOptions.from_spark({"journal": str(older), "tag": "order"})
    with pytest.raises(SchemaVersionError, match="run `ordo init`"):  # upgraded since defined
        EventsByTagPlanner(
            dataclasses.replace(options, journal=str(older)), resume_after="", now_ns=time.time_ns()
        )
    assert stored_version(older) == LATEST - 1


def test_a_starting_offset_in_the_future_is_refused_naming_the_one_given(tmp_path: Path) -> None:
    """The query refused it only once Spark had started, naming the offset moved back by
    backTrackPeriodMs; a pipeline then failed after writing its checkpoint."""
    url = f"sqlite:///{tmp_path}/x.db"
    init_storage(url)
    future = TimeUUID.min_for_epoch_ns(time.time_ns() + 365 * 24 * 3600 * 10**9)
    given = {"journal": url, "tag": "order", "startingOffsets": str(future)}
    with pytest.raises(FutureOffsetError) as raised:
        EventsByTagOptions.from_spark(given)
    assert str(raised.value).startswith(f"option startingOffsets: offset {future} (")
    assert str(raised.value).endswith(") is in the future")
    past = TimeUUID.min_for_epoch_ns(time.time_ns() - 10**9)
    options = EventsByTagOptions.from_spark({**given, "startingOffsets": str(past)})
    assert options.starting_offset == past


def test_the_sources_settings_default_to_the_ordo_variables_and_its_options_win(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/cli.md lists the source among the readers ORDO_BUCKET_SIZE governs; it ignored it."""
    url = f"sqlite:///{tmp_path}/x.db"
    with open_journal(url, settings=EventsByTagSettings(bucket_size=BucketSize.MINUTE)) as journal:
        journal.append("p", [NewEvent.of(1, tags=["order"])])
    given = {"journal": url, "tag": "order"}
    with pytest.raises(BucketSizeMismatchError) as raised:
        EventsByTagOptions.from_spark(given)
    assert str(raised.value).endswith("; set the option bucketSize (or ORDO_BUCKET_SIZE) to minute")

    monkeypatch.setenv("ORDO_BUCKET_SIZE", "minute")
    monkeypatch.setenv("ORDO_FIRST_TIME_BUCKET", "20200101T00:00")
    options = EventsByTagOptions.from_spark(given)
    assert options.events_by_tag.bucket_size is BucketSize.MINUTE
    assert options.events_by_tag.first_time_bucket == "20200101T00:00"
    first = EventsByTagOptions.from_spark({**given, "firstTimeBucket": "20210101T00:00"})
    assert first.events_by_tag.first_time_bucket == "20210101T00:00"
    with pytest.raises(BucketSizeMismatchError, match="bucket_size=hour"):
        EventsByTagOptions.from_spark({**given, "bucketSize": "hour"})
    with pytest.raises(BucketSizeMismatchError, match="bucket_size=hour"):  # not os.environ
        EventsByTagOptions.from_spark(given, environ={})
