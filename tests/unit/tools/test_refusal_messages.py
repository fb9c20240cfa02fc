"""The messages of operations' refusals, as an operator reads them."""

from __future__ import annotations

import pytest

from ordo.errors import TimeToLiveTooShortError


@pytest.mark.parametrize(
    ("retention_ms", "lag_ms", "retention", "lag"),
    [
        (2_592_000_000, 2_595_600_000, "the last 30 days of", "30 days behind"),
        (7_200_000, 5_400_000, "the last 2 h of", "1.5 h behind"),
        (90_000, 1_500, "the last 1.5 min of", "1.5 s behind"),
        (86_400_000, 3_600_000, "the last 1 day of", "1 h behind"),
    ],
)
def test_a_ttl_refusal_gives_durations_in_days_hours_minutes_or_seconds(
    retention_ms: int, lag_ms: int, retention: str, lag: str
) -> None:
    refusal = TimeToLiveTooShortError(retention_ms=retention_ms, lags={"slow": lag_ms, "new": None})

    message = str(refusal)

    assert retention in message
    assert f"'slow' ({lag})" in message
    assert "'new' (nothing read yet)" in message
