"""The settings of the operations tools, and events_by_tag.time_to_live."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ordo.errors import ConfigurationError
from ordo.settings import EventsByTagSettings, OperationsSettings
from ordo.settings.operations import WRITER_LEASE_DEADLINE


def test_time_to_live_is_off_by_default_and_read_in_milliseconds() -> None:
    assert EventsByTagSettings().time_to_live is None
    ttl = EventsByTagSettings.from_env({"ORDO_TIME_TO_LIVE_MS": "86400000"}).time_to_live
    assert ttl == timedelta(days=1)
    for off in ("none", "off", ""):
        assert EventsByTagSettings.from_mapping({"time_to_live_ms": off}).time_to_live is None


@pytest.mark.parametrize("bad", ["0", "-5", "soon"])
def test_a_bad_time_to_live_names_the_key(bad: str) -> None:
    with pytest.raises(ConfigurationError, match=r"(?i)time_to_live"):
        EventsByTagSettings.from_env({"ORDO_TIME_TO_LIVE_MS": bad})


def test_operations_settings_validate_themselves() -> None:
    settings = OperationsSettings.from_env(
        {"ORDO_WRITER_LEASE_TIMEOUT_MS": "60000", "ORDO_ROWS_PER_BATCH": "10"}
    )
    assert (settings.writer_lease_timeout_ms, settings.rows_per_batch) == (60_000, 10)
    for too_short in (timedelta(seconds=5), WRITER_LEASE_DEADLINE):
        with pytest.raises(ConfigurationError, match="writer_lease_timeout must be longer than"):
            OperationsSettings(writer_lease_timeout=too_short)
    just_above = OperationsSettings(writer_lease_timeout=timedelta(seconds=16))
    assert just_above.writer_lease_timeout_ms == 16_000
    with pytest.raises(ConfigurationError, match="rows_per_batch"):
        OperationsSettings(rows_per_batch=0)
