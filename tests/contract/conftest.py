"""Fixtures of the contract tests: `journal`, a Journal at `journal_url` that writes its tag
views at once (the backend fixtures it builds on are in tests/conftest.py).
"""

from __future__ import annotations

import pytest

from journal_support import IMMEDIATE, JournalFactory
from ordo import Journal


@pytest.fixture
def journal(journal_factory: JournalFactory) -> Journal:
    return journal_factory(settings=IMMEDIATE)
