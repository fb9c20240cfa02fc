"""The documented mutation JSON format: round trip, and specific errors for malformed input."""

from __future__ import annotations

import json

import pytest

from ordo.cdc import Audit, Cell, Mutation, mutation_from_json, mutation_to_json
from ordo.cdc.mutation_json import parse_mutation_line
from ordo.errors import MalformedMutationError

FULL = Mutation(
    table="users",
    partition_key=(42,),
    clustering_key=("2026",),
    cells={
        "name": Cell(value="Ada", write_time=10, ttl_s=60),
        "gone": Cell(value=None, write_time=9),
    },
    liveness=Cell(value=True, write_time=10),
    schema_id=2,
    audit=Audit(source="cassandra", replica="10.0.0.1", segment="CommitLog-7-1.log", position=4096),
)


def test_a_mutation_round_trips_through_its_json_line() -> None:
    line = json.dumps(mutation_to_json(FULL))
    assert parse_mutation_line(line) == FULL


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("not json", "line 3"),
        ('{"table": 1, "partition_key": [1], "audit": {"source": "s"}}', "'table'"),
        ('{"table": "t", "partition_key": [1]}', "'audit'"),
        (
            '{"table": "t", "partition_key": [], "cells": {"a": {"value": 1, "write_time": 1}}, '
            '"audit": {"source": "s"}}',
            "no partition key",
        ),
        (
            '{"table": "t", "partition_key": [1], "cells": {"a": {"value": 1}}, '
            '"audit": {"source": "s"}}',
            "write_time",
        ),
        ('{"table": "t", "partition_key": [1], "audit": {"source": "s"}}', "changes nothing"),
        (
            '{"table": "t", "partition_key": [[1]], "row_deleted_at": 1, "audit": {"source": "s"}}',
            "scalars",
        ),
    ],
)
def test_malformed_lines_raise_a_specific_error(line: str, problem: str) -> None:
    with pytest.raises(MalformedMutationError, match=problem):
        parse_mutation_line(line, line_nr=3)


def test_only_a_json_object_is_a_mutation() -> None:
    with pytest.raises(MalformedMutationError):
        mutation_from_json([1, 2])
