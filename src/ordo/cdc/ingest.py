"""The ingestion path: raw mutations from any producer, published like captured changes.

This is how a Cassandra CDC agent or the replica simulation feeds the pipeline: mutations in the
documented JSON format (`ordo.cdc.mutation_json`) are checked whole, then published.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from ordo.cdc.mutation import Mutation
from ordo.cdc.mutation_json import parse_mutation_line
from ordo.cdc.publisher import Publisher, PublishReceipt
from ordo.cdc.schema_registry import SchemaRegistry


def parse_mutation_lines(lines: Iterable[str]) -> list[Mutation]:
    """Every mutation of a JSON lines text (blank lines skipped).

    MalformedMutationError names the first bad line; then nothing of the text is used.
    """
    return [
        parse_mutation_line(line, line_nr=number)
        for number, line in enumerate(lines, start=1)
        if line.strip()
    ]


def ingest(
    mutations: Sequence[Mutation], publisher: Publisher, registry: SchemaRegistry
) -> PublishReceipt:
    """Name each mutation's schema (the table's current one unless it names its own) and publish.

    A table without a registered schema raises UnknownSchemaError before anything is published.
    """
    current = {table: registry.current(table).schema_id for table in {m.table for m in mutations}}
    named = [
        m if m.schema_id is not None else dataclasses.replace(m, schema_id=current[m.table])
        for m in mutations
    ]
    return publisher.publish(named)
