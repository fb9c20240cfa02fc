"""The documented mutation JSON format: round trip, and specific errors for malformed input."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given

from cdc_support import mutations
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


def test_the_extremes_of_every_number_round_trip() -> None:
    lowest = -(2**63)
    extreme = dataclasses.replace(
        FULL,
        cells={"name": Cell(value="Ada", write_time=lowest, ttl_s=2**63 - 1)},
        liveness=Cell(value=True, write_time=2**63 - 1, ttl_s=1),
        row_deleted_at=lowest,
        audit=Audit(source="s", position=0, captured_at_us=0),
    )
    assert parse_mutation_line(json.dumps(mutation_to_json(extreme))) == extreme


@given(mutations())
def test_every_mutation_round_trips_through_its_json_line(mutation: Mutation) -> None:
    assert parse_mutation_line(json.dumps(mutation_to_json(mutation))) == mutation


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
            "cell 'a' field 'write_time' is missing",
        ),
        (
            '{"table": "t", "partition_key": [1], "liveness": {"ttl_s": 5}, '
            '"audit": {"source": "s"}}',
            "liveness field 'write_time' is missing",
        ),
        (
            '{"table": "t", "partition_key": [1], '
            '"cells": {"a": {"value": 1, "write_time": null}}, "audit": {"source": "s"}}',
            "cell 'a' field 'write_time' must be an integer, got None",
        ),
        ('{"table": "t", "partition_key": [1], "audit": {"source": "s"}}', "changes nothing"),
        (
            '{"table": "t", "partition_key": [[1]], "row_deleted_at": 1, "audit": {"source": "s"}}',
            "scalars",
        ),
        (
            '{"table": "t", "partition_key": [1], "row_deleted_at": 1, "bogus": 1, '
            '"audit": {"source": "s"}}',
            r"the mutation has unknown key 'bogus' \(valid keys: table, partition_key, ",
        ),
        (
            '{"table": "t", "partition_key": [1], "row_deleted_at": 1, '
            '"audit": {"source": "s", "pos": 1}}',
            r"field 'audit' has unknown key 'pos' \(valid keys: source, replica, segment, ",
        ),
        (
            '{"table": "t", "partition_key": [1], "cells": {"a": {"write_time": 1, "ttl": 5}}, '
            '"audit": {"source": "s"}}',
            r"cell 'a' has unknown key 'ttl' \(valid keys: value, write_time, ttl_s\)",
        ),
        (
            '{"table": "t", "partition_key": [1], "liveness": {"write_time": 1, "value": true}, '
            '"audit": {"source": "s"}}',
            r"liveness has unknown key 'value' \(valid keys: write_time, ttl_s\)",
        ),
        (
            '{"table": "t", "partition_key": [1], "row_deleted_at": 1, '
            '"audit": {"source": "s", "position": -13}}',
            r"audit field 'position' must be an integer >= 0, got -13",
        ),
        (
            '{"table": "t", "partition_key": [1], "row_deleted_at": 1, '
            '"audit": {"source": "s", "captured_at_us": -1}}',
            r"audit field 'captured_at_us' must be an integer >= 0, got -1",
        ),
        (
            '{"table": "t", "partition_key": [1], "cells": {"a": {"write_time": 1, "ttl_s": 0}}, '
            '"audit": {"source": "s"}}',
            r"cell 'a' field 'ttl_s' must be an integer >= 1, got 0",
        ),
        (
            '{"table": "t", "partition_key": [1], "row_deleted_at": 9223372036854775808, '
            '"audit": {"source": "s"}}',
            r"field 'row_deleted_at' is too large: at most 9223372036854775807 \(2\*\*63 - 1\)",
        ),
        (
            '{"table": "t", "partition_key": [1], "row_deleted_at": 1, '
            '"audit": {"source": "s", "segment": null, "replica": 5}}',
            "audit field 'replica' must be a string, got 5",
        ),
        (  # the json module kept the last one, without a word
            '{"table": "t", "partition_key": [1], "row_deleted_at": 1, "row_deleted_at": null, '
            '"audit": {"source": "s"}}',
            "^line 3: duplicate key 'row_deleted_at'$",
        ),
        (
            '{"table": "t", "partition_key": [1' + "0" * 5_000 + '], "audit": {"source": "s"}}',
            r"^line 3: integer too long \(5,001 digits, at most 4,300\)$",
        ),
    ],
)
def test_malformed_lines_raise_a_specific_error(line: str, problem: str) -> None:
    with pytest.raises(MalformedMutationError, match=problem):
        parse_mutation_line(line, line_nr=3)


def test_an_error_names_the_file_of_its_line_when_given_one() -> None:
    with pytest.raises(MalformedMutationError, match=r"^line 3 of in\.jsonl: "):
        parse_mutation_line("[]", line_nr=3, source="in.jsonl")


def test_only_a_json_object_is_a_mutation() -> None:
    with pytest.raises(MalformedMutationError):
        mutation_from_json([1, 2])


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("NaN", "NaN is not a JSON number"),
        ("Infinity", "Infinity is not a JSON number"),
        ("-Infinity", "-Infinity is not a JSON number"),
        ("1e999", "number 1e999 is out of the range of a double"),
        ("-1.5e400", "number -1.5e400 is out of the range of a double"),
        # read as a double, each was published as another number than the line says
        ("0.10000000000000000001", "number 0.10000000000000000001 is rounded to 0.1 as a double"),
        ("1e-400", "number 1e-400 is rounded to 0.0 as a double"),
        (
            "-2.00000000000000000000001e10",
            "number -2.00000000000000000000001e10 is rounded to -20000000000.0 as a double",
        ),
    ],
)
@pytest.mark.parametrize("where", ["cell", "key"])
def test_nan_infinities_and_numbers_a_double_cannot_hold_are_refused(
    value: str, problem: str, where: str
) -> None:
    key, cell = (value, "1") if where == "key" else ("1.5", value)
    line = (
        f'{{"table": "t", "partition_key": [{key}], '
        f'"cells": {{"v": {{"value": {cell}, "write_time": 5}}}}, "audit": {{"source": "s"}}}}'
    )
    with pytest.raises(MalformedMutationError, match=rf"^line 1 of m\.jsonl: {problem}"):
        parse_mutation_line(line, line_nr=1, source="m.jsonl")


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("1.50", 1.5),
        ("1E+2", 100.0),
        ("100000000000000000000.0", 1e20),
        ("1767225600.123456", 1767225600.123456),
        ("0.30000000000000004", 0.1 + 0.2),
        ("5e-324", 5e-324),
    ],
)
def test_another_spelling_of_a_double_is_read_as_that_double(text: str, number: float) -> None:
    line = (
        f'{{"table": "t", "partition_key": [{text}], "liveness": {{"write_time": 5}}, '
        '"audit": {"source": "s"}}'
    )
    assert parse_mutation_line(line).partition_key == (number,)
