"""Fixtures of the backend tests: `sessions`, the connection loss tests' URL whose sessions a
test can end (see tests/connection_loss_support.py)."""

from __future__ import annotations

import pytest

from connection_loss_support import Sessions


@pytest.fixture
def sessions(postgres_dsn: str) -> Sessions:
    return Sessions(postgres_dsn)
