"""Reading an ingestion input: line numbers, errors naming the input, JSON's own line breaks."""

from __future__ import annotations

import json

import pytest

from ordo.cdc import Audit, Cell, Mutation, mutation_to_json
from ordo.cdc.ingest import parse_mutation_lines
from ordo.errors import MalformedMutationError

WRITE = Mutation(
    table="t",
    partition_key=(1,),
    cells={"note": Cell(value="a\u2028b\x85c", write_time=1)},
    audit=Audit(source="s", segment="g", position=1),
)


def test_lines_end_at_line_feeds_only_and_keep_their_numbers() -> None:
    line = json.dumps(mutation_to_json(WRITE), ensure_ascii=False)
    assert "\u2028" in line  # a line break str.splitlines would split at, valid inside JSON
    data = f"\n{line}\r\n\n{line}\n".encode()
    lines = parse_mutation_lines("in.jsonl", data)
    assert lines.source == "in.jsonl"
    assert lines.mutations == ((2, WRITE), (4, WRITE))


def test_a_bad_line_is_named_by_its_input_and_number() -> None:
    data = f"{json.dumps(mutation_to_json(WRITE))}\n\n{{not json\n".encode()
    with pytest.raises(MalformedMutationError, match=r"^line 3 of in\.jsonl: "):
        parse_mutation_lines("in.jsonl", data)


def test_an_input_that_is_not_utf8_text_is_named() -> None:
    with pytest.raises(MalformedMutationError, match=r"^in\.jsonl: not a text file: "):
        parse_mutation_lines("in.jsonl", b"\xff\xfe\x00{}")
