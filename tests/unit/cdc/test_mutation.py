"""The mutation dataclasses refuse values the change log cannot store, where they are built."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from ordo.cdc import Audit, Cell, Mutation
from ordo.errors import MalformedMutationError


@pytest.mark.parametrize("write_time", ["x", 1.5, True, None, 2**63, -(2**63) - 1])
def test_a_cell_write_time_that_is_no_bigint_is_refused(write_time: object) -> None:
    with pytest.raises(MalformedMutationError, match=r"^cell write_time (must be|is too large)"):
        Cell(value=1, write_time=write_time)  # type: ignore[arg-type]


@pytest.mark.parametrize("ttl_s", ["5", 2.0, True, 0, -1, 2**63])
def test_a_cell_ttl_that_is_no_positive_bigint_is_refused(ttl_s: object) -> None:
    with pytest.raises(MalformedMutationError, match=r"^cell ttl_s (must be|is too large)"):
        Cell(value=1, write_time=1, ttl_s=ttl_s)  # type: ignore[arg-type]


def test_a_cell_takes_the_whole_bigint_range() -> None:
    assert Cell(value=1, write_time=-(2**63), ttl_s=2**63 - 1).ttl_s == 2**63 - 1


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("position", -1, r"audit position must be an integer >= 0, got -1"),
        ("position", 2**64, r"audit position is too large: at most 9223372036854775807 \("),
        ("position", "3", r"audit position must be an integer, got '3'"),
        ("captured_at_us", -1, r"audit captured_at_us must be an integer >= 0, got -1"),
        ("captured_at_us", 1.0, r"audit captured_at_us must be an integer, got 1.0"),
        ("source", 3, r"audit source must be a string, got 3"),
        ("replica", None, r"audit replica must be a string, got None"),
        ("segment", b"slot", r"audit segment must be a string, got b'slot'"),
    ],
)
def test_an_audit_field_the_log_cannot_store_is_refused(
    field: str, value: object, problem: str
) -> None:
    with pytest.raises(MalformedMutationError, match=f"^{problem}"):
        Audit(**{"source": "s", field: value})  # type: ignore[arg-type]


def _mutation(**fields: object) -> Mutation:
    values: dict[str, object] = {
        "table": "t",
        "partition_key": (1,),
        "cells": {"a": Cell(value=1, write_time=1)},
        "audit": Audit(source="s"),
    }
    return Mutation(**(values | fields))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("table", 5, r"^mutation table must be a non-empty string, got 5"),
        ("table", "", r"^mutation table must be a non-empty string, got ''"),
        ("cells", [1], r"cells must map column names to Cells, got \[1\]"),
        ("cells", {"a": 1}, r"cells must map column names to Cells, got \{'a': 1\}"),
        ("cells", {1: Cell(value=1, write_time=1)}, r"cells must map column names to Cells"),
        ("liveness", 5, r"liveness must be a Cell or None, got 5"),
        ("audit", None, r"audit must be an Audit, got None"),
        ("row_deleted_at", "x", r"row_deleted_at must be an integer, got 'x'"),
        (
            "partition_deleted_at",
            2**64,
            r"partition_deleted_at is too large: at most 9223372036854775807 \(2\*\*63 - 1\)",
        ),
        ("schema_id", 1.0, r"schema_id must be an integer, got 1.0"),
    ],
)
def test_a_mutation_field_of_the_wrong_type_is_refused(
    field: str, value: object, problem: str
) -> None:
    with pytest.raises(MalformedMutationError, match=problem):
        _mutation(**{field: value})


def test_a_mutation_may_hold_any_mapping_of_cells() -> None:
    cells = MappingProxyType({"a": Cell(value=1, write_time=1)})
    assert _mutation(cells=cells).cells is cells
