"""What importing the Spark source costs: Spark imports it in a fresh process for every query."""

from __future__ import annotations

import subprocess
import sys

import pytest

import ordo.spark

_LOADED = (
    "import sys, ordo.spark.events_by_tag_source; "
    "print(sorted(m for m in ('pandas', 'ordo.spark.materializer') if m in sys.modules))"
)


def test_the_source_loads_neither_the_materializer_nor_pandas() -> None:
    loaded = subprocess.run(
        [sys.executable, "-c", _LOADED], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "[]"


def test_the_materializer_names_resolve_on_first_use() -> None:
    from ordo.spark.materializer import MaterializerSpec, materialize

    assert ordo.spark.materialize is materialize
    assert ordo.spark.MaterializerSpec is MaterializerSpec
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        ordo.spark.nothing  # noqa: B018 - the attribute access is the test
