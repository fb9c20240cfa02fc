"""Ingested keys on both backends: one fold key per row of the materialized table (G6).

The fold keys a row by its key's JSON text; the sink keys it by the value its key column holds.
An ingested key may name one sink row in several JSON forms (the decimal 1 and "1", the double
1 and 1.0, the bytes "ab" and "AB"): written as given, those were several fold keys for one
row, so deleting one of them emptied the table while the fold still held the others. Ingestion
writes each key in its column type's one form, so the table is the fold of the log.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from cdc_support import apply_as_m
from ordo.cdc import (
    ChangeMessage,
    Column,
    ColumnType,
    JsonValue,
    PartitionState,
    Publisher,
    SchemaRegistry,
    TableSchema,
)
from ordo.cdc.change_rows import key_text
from ordo.cdc.ingest import ingest, parse_mutation_lines
from ordo.cdc.materializer import materialize_partition
from ordo.cdc.schema_catalog import SchemaCatalog
from ordo.errors import IncompatibleSchemaError
from ordo.storage.parquet import ParquetChangeLog
from ordo.storage.stores import Stores

QUERY = "3f5e0d1c-0000-4000-8000-000000000004"

FORMS: dict[ColumnType, tuple[list[JsonValue], list[str]]] = {
    ColumnType.DECIMAL: ([1, "1", 1.5, "1.5"], ['["1"]', '["1.5"]']),
    ColumnType.DOUBLE: (
        [1, 1.0, 1e0, 0.0, -0.0, 2**53, 2**53 + 1],
        ["[1.0]", "[0.0]", "[9007199254740992.0]"],
    ),
    ColumnType.BYTES: (
        ["ab", "AB", "\\xab", "\\xAB", " ab ", "0a0B", "0A0b"],
        ['["ab"]', '["0a0b"]'],
    ),
}
"""Key values in several JSON forms, in the order written, and the fold keys they are: one
per row of the sink (and of an SQLite or PostgreSQL table of the type). Each is written, then
every second one deleted, which deletes every row."""


def _ingest(stores: Stores, log: Path, mutations: Sequence[Mapping[str, object]]) -> None:
    lines = "\n".join(json.dumps(m) for m in mutations).encode()
    registry = SchemaRegistry(stores.schemas)
    ingest([parse_mutation_lines("in.jsonl", lines)], Publisher(ParquetChangeLog(log)), registry)


def _fold(stores: Stores, log: Path, schema: TableSchema) -> list[ChangeMessage]:
    """The log's mutations folded one by one in position order, as the materializer folds them:
    by the partition key's text in the log."""
    catalog = SchemaCatalog(schema.table, lambda: stores.schemas.versions(schema.table))
    states: dict[str, PartitionState] = {}
    messages: list[ChangeMessage] = []
    for mutation in sorted(
        ParquetChangeLog(log).read(schema.table), key=lambda m: m.audit.position
    ):
        text = key_text(mutation.partition_key)
        folded = materialize_partition(
            states.get(text, PartitionState()), [mutation], catalog.resolve
        )
        assert folded.rejected == []
        states[text] = folded.state
        messages.extend(folded.messages)
    return messages


@pytest.mark.parametrize("key_type", list(FORMS), ids=[t.value for t in FORMS])
def test_a_key_ingested_in_several_forms_of_one_row_is_one_fold_key(
    stores: Stores, tmp_path: Path, key_type: ColumnType
) -> None:
    """Each message applied as a batch of its own: the table holds what the fold's last
    message of each key says, and every key of one row is one fold key."""
    schema = TableSchema(
        table="things",
        columns=(
            Column(name="k", type=key_type, nullable=False),
            Column(name="n", type=ColumnType.LONG),
        ),
        partition_key=("k",),
    )
    SchemaRegistry(stores.schemas).register(schema)
    forms, fold_keys = FORMS[key_type]
    writes = [
        {
            "table": "things",
            "partition_key": [k],
            "cells": {"n": {"value": n, "write_time": n + 1}},
            "liveness": {"write_time": n + 1},
            "audit": {"source": "test", "position": n + 1},
        }
        for n, k in enumerate(forms)
    ]
    deletes = [
        {
            "table": "things",
            "partition_key": [k],
            "row_deleted_at": 100,
            "audit": {"source": "test", "position": 100 + n},
        }
        for n, k in enumerate(forms[1::2])
    ]
    log = tmp_path / "log"
    _ingest(stores, log, writes)
    _ingest(stores, log, deletes)

    messages = _fold(stores, log, schema)
    history = SchemaRegistry(stores.schemas).history("things")
    for batch_id, message in enumerate(messages):
        apply_as_m(
            stores.change_sink, batch_id, [message], history, query_id=QUERY, target_table="things"
        )

    live = {key_text(m.key): m.after for m in messages}  # the last message of each fold key
    assert {k: row for k, row in live.items() if row is not None} == {}
    assert stores.change_sink.read_table("things", schema) == {}
    assert sorted(live) == sorted(fold_keys)


def test_a_clustering_key_takes_the_forms_of_the_version_its_mutation_names(
    stores: Stores, tmp_path: Path
) -> None:
    """The version named, not the current one: there `c` is bytes, in the current a string.
    A schema id the registry does not have leaves the key as written (for the dead letters)."""
    registry = SchemaRegistry(stores.schemas)
    columns = (Column(name="id", type=ColumnType.DOUBLE, nullable=False),)
    named = registry.register(
        TableSchema(
            table="things",
            columns=(*columns, Column(name="c", type=ColumnType.BYTES, nullable=False)),
            partition_key=("id",),
            clustering_key=("c",),
        )
    )
    with pytest.raises(IncompatibleSchemaError):  # a retype, which an operator accepts
        registry.register(
            TableSchema(
                table="things",
                columns=(*columns, Column(name="c", type=ColumnType.STRING, nullable=False)),
                partition_key=("id",),
                clustering_key=("c",),
            )
        )
    registry.accept("things", 2)
    writes = [
        {
            "table": "things",
            "partition_key": [1],
            "clustering_key": [c],
            "liveness": {"write_time": 1},
            "schema_id": schema_id,
            "audit": {"source": "test", "position": n},
        }
        for n, (c, schema_id) in enumerate(
            [("AB", named.schema_id), ("\\xab", named.schema_id), ("AB", None), ("AB", 999)], 1
        )
    ]
    log = tmp_path / "log"
    _ingest(stores, log, writes)

    keys = sorted(ParquetChangeLog(log).read("things"), key=lambda m: m.audit.position)
    assert [(key_text(m.partition_key), m.clustering_key) for m in keys] == [
        ("[1.0]", ("ab",)),
        ("[1.0]", ("ab",)),
        ("[1.0]", ("AB",)),
        ("[1]", ("AB",)),
    ]
