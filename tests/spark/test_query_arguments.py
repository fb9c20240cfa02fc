"""What starts ordo's Spark work refuses arguments of the wrong kind before anything starts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ordo.errors import ConfigurationError
from ordo.spark import (
    MaterializerSpec,
    ProjectionSpec,
    materialize,
    projection,
    register,
    start_session,
)
from ordo.spark.demo import count_order_events

_GOOD: dict[str, object] = {
    "checkpoint": "checkpoint",
    "available_now": False,
    "processing_time": None,
}

_BAD: list[tuple[dict[str, object], str]] = [
    ({"spark": None}, r"^spark must be a SparkSession, got NoneType"),
    ({"checkpoint": None}, r"^checkpoint must be a non-empty path or URI, got None"),
    ({"checkpoint": ""}, r"^checkpoint must be a non-empty path or URI"),
    ({"checkpoint": "check\x00point"}, r"^a path cannot hold a NUL character"),
    ({"available_now": "no"}, r"^available_now must be True or False"),
    ({"processing_time": 10}, r"^processing_time must be an interval such as '10 seconds'"),
    (
        {"available_now": True, "processing_time": "1 second"},
        r"^available_now and processing_time \('1 second'\) are two triggers",
    ),
]


def _call(
    start: Callable[..., object], session: SparkSession, spec: object, /, **changes: object
) -> None:
    """`start(spark, spec, ...)` with good arguments but `changes` (`spark` among them)."""
    values = {"spark": session, **_GOOD, **changes}
    start(values.pop("spark"), spec, **values)


@pytest.mark.parametrize(("changes", "problem"), _BAD)
def test_a_projection_refuses_arguments_of_the_wrong_kind_before_it_starts(
    spark: SparkSession, tmp_path: Path, changes: dict[str, object], problem: str
) -> None:
    """A session or checkpoint of None was an AttributeError or TypeError, and both triggers
    started a query that ignored processing_time."""
    spec = ProjectionSpec(
        processor="totals", sink=f"sqlite:///{tmp_path}/sink.db", handler=count_order_events
    )
    options = {"journal": f"sqlite:///{tmp_path}/journal.db", "tag": "order"}
    with pytest.raises(ConfigurationError, match=problem):
        _call(projection, spark, spec, source_options=options, **changes)
    assert list(tmp_path.iterdir()) == []
    assert spark.streams.active == []


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"spec": None}, r"^spec must be a ProjectionSpec, got NoneType"),
        ({"source_options": "journal=x"}, r"^source_options must be a mapping, got str"),
    ],
)
def test_a_projection_refuses_a_spec_or_source_options_of_the_wrong_kind(
    spark: SparkSession, tmp_path: Path, changes: dict[str, object], problem: str
) -> None:
    values: dict[str, object] = {
        "spec": ProjectionSpec(processor="p", sink="sqlite:///s.db", handler=count_order_events),
        "source_options": {"journal": "sqlite:///j.db", "tag": "order"},
        **changes,
    }
    with pytest.raises(ConfigurationError, match=problem):
        _call(projection, spark, values.pop("spec"), **values)


@pytest.mark.parametrize(("changes", "problem"), _BAD)
def test_a_materializer_refuses_arguments_of_the_wrong_kind_before_it_opens_its_sink(
    spark: SparkSession, tmp_path: Path, changes: dict[str, object], problem: str
) -> None:
    """A checkpoint of None was a TypeError once the sink's schema had been created."""
    spec = MaterializerSpec(
        name="x", table="users", change_log=str(tmp_path / "log"), sink=f"sqlite:///{tmp_path}/s.db"
    )
    with pytest.raises(ConfigurationError, match=problem):
        _call(materialize, spark, spec, **changes)
    assert list(tmp_path.iterdir()) == []
    assert spark.streams.active == []


def test_a_materializer_refuses_a_spec_of_another_kind(spark: SparkSession) -> None:
    spec = ProjectionSpec(processor="p", sink="sqlite:///s.db", handler=count_order_events)
    with pytest.raises(ConfigurationError, match=r"^spec must be a MaterializerSpec, got Proj"):
        _call(materialize, spark, spec)


def test_register_refuses_what_is_no_session() -> None:
    """An AttributeError (no dataSource) before."""
    with pytest.raises(ConfigurationError, match=r"^spark must be a SparkSession, got str"):
        register("local[*]")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"master": ""}, r"^master must be a non-empty text"),
        ({"app_name": None}, r"^app_name must be a non-empty text, got None"),
        ({"output": 5}, r"^output must be a file path"),
    ],
)
def test_start_session_refuses_arguments_of_the_wrong_kind_before_spark_starts(
    arguments: dict[str, object], problem: str
) -> None:
    """An output of 5 was an AttributeError (no parent); an empty master was Spark's error."""
    with pytest.raises(ConfigurationError, match=problem):
        start_session(**arguments)  # type: ignore[arg-type]
