"""Where queries and processors resume: offsets read from what callers give."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ordo.errors import ConfigurationError, OffsetFormatError
from ordo.query import looking_back
from ordo.settings import QuerySettings
from ordo.time import TimeUUID

OFFSET = TimeUUID.parse("5f1a2c10-e5f0-11f1-8000-000000000001")


def test_looking_back_starts_back_track_period_before_the_offset() -> None:
    settings = QuerySettings(back_track_period=timedelta(seconds=2))
    assert looking_back(OFFSET, settings).epoch_ns == (OFFSET.epoch_ns - 2_000_000_000) // 100 * 100


@pytest.mark.parametrize(
    ("replayed_ns", "start_ns"),
    [
        (-3_000_000_000, -2_000_000_000),  # long before: back_track_period before the offset
        (-1_000_000_000, -1_000_000_000),  # within the period: the replay boundary
        (1_000_000_000, 0),  # beyond the offset (still replaying): the offset
    ],
)
def test_looking_back_after_a_reset_stops_at_the_replay_boundary(
    replayed_ns: int, start_ns: int
) -> None:
    """A reset cleared the positions of the events up to its boundary: a reader that looked
    back past it handled again the events just before the offset it was reset to."""
    settings = QuerySettings(back_track_period=timedelta(seconds=2))
    replayed = TimeUUID.min_for_epoch_ns(OFFSET.epoch_ns + replayed_ns)
    start = looking_back(OFFSET, settings, replayed=replayed)
    assert start.epoch_ns == OFFSET.epoch_ns + start_ns


@pytest.mark.parametrize("offset", [None, str(OFFSET), OFFSET.key])
def test_looking_back_refuses_an_offset_that_is_no_timeuuid(offset: object) -> None:
    """An AttributeError (no epoch_ns) before."""
    with pytest.raises(OffsetFormatError, match=r"^offset must be a TimeUUID, got "):
        looking_back(offset, QuerySettings())  # type: ignore[arg-type]


@pytest.mark.parametrize("settings", [None, {"back_track_period": 0}])
def test_looking_back_refuses_settings_of_another_kind(settings: object) -> None:
    with pytest.raises(ConfigurationError, match=r"^settings must be a QuerySettings, got "):
        looking_back(OFFSET, settings)  # type: ignore[arg-type]
