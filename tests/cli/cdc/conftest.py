"""Fixtures of the `ordo cdc` command tests.

Their `journal` is a URL where no journal is yet (`init` or the first command creates it);
tests/cli/test_cdc_source_status.py has a `journal` of its own, an initialized one, which is
why these tests have a folder of their own.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def journal(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ordo.db'}"
