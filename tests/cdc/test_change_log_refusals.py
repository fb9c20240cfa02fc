"""What the publisher refuses before anything is written: table names no directory can have,
what is not a mutation, and texts, values and keys no store can hold."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from change_log_support import mutation_of
from ordo.cdc import Audit, Cell, Mutation, Publisher, partition_of
from ordo.errors import InvalidInputError, MalformedMutationError
from ordo.storage.parquet import ParquetChangeLog


@pytest.mark.parametrize("table", ["../../escaped", "/tmp/abs", "a/b", "..", "nul\x00"])
def test_a_table_name_that_is_not_one_directory_name_is_refused(tmp_path: Path, table: str) -> None:
    log = ParquetChangeLog(tmp_path / "log" / "root")
    with pytest.raises(InvalidInputError, match="cannot name a change log directory"):
        Publisher(log, partitions=2).publish([mutation_of(1, 1, table=table)])
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_a_table_name_that_is_not_unicode_text_is_refused(tmp_path: Path) -> None:
    log = ParquetChangeLog(tmp_path)
    not_unicode = mutation_of(1, 1, table="users\udcff")
    with pytest.raises(InvalidInputError, match=r"^table name 'users\\udcff' is not valid Unicode"):
        Publisher(log).publish([not_unicode])
    with pytest.raises(InvalidInputError, match="not valid Unicode"):
        log.summary("\ud800")  # as `ordo cdc status` would ask for a name given in bytes
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("element", [None, "m", {"table": "users"}])
def test_publishing_what_is_not_a_mutation_is_refused_before_anything_is_written(
    tmp_path: Path, element: object
) -> None:
    log = ParquetChangeLog(tmp_path)
    Publisher(log).publish([mutation_of(key=1, position=1)])
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(MalformedMutationError, match="only Mutations can be published, got "):
        Publisher(log).publish([mutation_of(key=2, position=2), element])  # type: ignore[list-item]
    assert sorted(tmp_path.rglob("*")) == before


def test_keys_must_be_tuples_not_strings() -> None:
    with pytest.raises(MalformedMutationError, match="keys must be tuples"):
        Mutation(table="t", partition_key="abc", audit=Audit(source="s"))  # type: ignore[arg-type]


@pytest.mark.parametrize("field", ["source", "replica", "segment"])
@pytest.mark.parametrize("text", ["\ud800", "a\x00b"])
def test_an_audit_text_no_store_can_hold_is_refused_before_anything_is_written(
    tmp_path: Path, field: str, text: str
) -> None:
    log = ParquetChangeLog(tmp_path)
    good = mutation_of(key=1, position=1)
    texts: dict[str, Any] = {field: text}  # any of the audit's text fields, by name
    bad = dataclasses.replace(good, audit=dataclasses.replace(good.audit, **texts))
    with pytest.raises(MalformedMutationError, match=f"^audit {field} "):
        Publisher(log).publish([good, bad])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", [{1}, b"x", object()])
def test_a_cell_value_json_has_no_form_for_is_refused_before_anything_is_written(
    tmp_path: Path, value: object
) -> None:
    good = mutation_of(key=1, position=1)
    bad = dataclasses.replace(good, cells={"n": Cell(value=value, write_time=2)})  # type: ignore[arg-type]
    with pytest.raises(MalformedMutationError, match=r"^mutation of table 'users' key \(1,\): "):
        Publisher(ParquetChangeLog(tmp_path)).publish([good, bad])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "fields",
    [
        {"partition_key": ("a\udcff",)},
        {"clustering_key": ("\ud800",)},
        {"cells": {"n": Cell(value="\ud800x", write_time=2)}},
        {"cells": {"n": Cell(value=["ok", {"deep": "\udfff"}], write_time=2, ttl_s=5)}},
        {"cells": {"\ud800": Cell(value=1, write_time=2)}},
    ],
)
def test_a_lone_surrogate_in_a_key_or_cell_is_refused_before_anything_is_written(
    tmp_path: Path, fields: dict[str, object]
) -> None:
    bad = dataclasses.replace(mutation_of(key=1, position=2), **fields)  # type: ignore[arg-type]
    with pytest.raises(MalformedMutationError, match="holds a lone surrogate"):
        Publisher(ParquetChangeLog(tmp_path)).publish([mutation_of(key=1, position=1), bad])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "key", ["abc", ["abc"], (), None, 5, (float("nan"),), ({1},), (b"x",), ("\ud800",)]
)
def test_partition_of_takes_only_a_partition_key(key: object) -> None:
    """A str was routed as one key value per character, a list or () as no mutation's key."""
    with pytest.raises(MalformedMutationError, match="partition key"):
        partition_of(key, 4)  # type: ignore[arg-type]
