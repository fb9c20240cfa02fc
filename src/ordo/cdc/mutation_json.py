"""The documented JSON form of a raw mutation: the ingestion format and the change log's cells.

One JSON object per mutation (one per line in a JSON lines file)::

    {"table": "users", "partition_key": [42], "clustering_key": [],
     "cells": {"name": {"value": "Ada", "write_time": 1700000000000000, "ttl_s": null}},
     "liveness": {"write_time": 1700000000000000, "ttl_s": null},
     "row_deleted_at": null, "partition_deleted_at": null, "schema_id": null,
     "audit": {"source": "cassandra", "replica": "10.0.0.1",
               "segment": "10.0.0.1/CommitLog-7-1.log", "position": 4096,
               "captured_at_us": 1700000000100000}}

Only `table`, `partition_key`, `audit.source` and the `write_time` of each cell and of `liveness`
are required; absent fields mean "none". Anything
else that does not fit raises MalformedMutationError naming the field: a key the format does not
have, a number outside a signed 64-bit integer (the change log stores BIGINTs), a negative audit
`position` or `captured_at_us`, a `ttl_s` that is not positive, and `NaN`, `Infinity` or a number
beyond a double's range (`1e999`), which Python's json module would read but JSON does not have.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ordo.cdc.mutation import BIGINT_MIN, Audit, Cell, JsonValue, Key, Mutation, check_bigint
from ordo.documents import USER_JSON_DECODER, decode_json, reject_unknown_keys
from ordo.errors import MalformedMutationError

_SCALARS = (type(None), bool, int, float, str)
_MUTATION_KEYS = (
    "table",
    "partition_key",
    "clustering_key",
    "cells",
    "liveness",
    "row_deleted_at",
    "partition_deleted_at",
    "schema_id",
    "audit",
)
_AUDIT_KEYS = ("source", "replica", "segment", "position", "captured_at_us")
_CELL_KEYS = ("value", "write_time", "ttl_s")
_LIVENESS_KEYS = ("write_time", "ttl_s")


def _int(
    document: Mapping[str, Any],
    name: str,
    *,
    where: str = "",
    optional: bool = True,
    minimum: int = BIGINT_MIN,
) -> int | None:
    """An integer field that fits the change log's BIGINT columns and is at least `minimum`.

    A required field that is absent is called missing: "must be an integer, got None" read as if
    the producer had written a null.
    """
    label = f"{where} field {name!r}" if where else f"field {name!r}"
    value = document.get(name)
    if value is None and optional:
        return None
    if name not in document:
        msg = f"{label} is missing"
        raise MalformedMutationError(msg)
    return check_bigint(label, value, minimum=minimum)


def _text(document: Mapping[str, Any], name: str, *, where: str) -> str:
    """An optional string field ("" when absent or null), never another value turned into text."""
    value = document.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        msg = f"{where} field {name!r} must be a string, got {value!r}"
        raise MalformedMutationError(msg)
    return value


def _key(document: Mapping[str, Any], name: str) -> Key:
    value = document.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, _SCALARS) for v in value):
        msg = f"field {name!r} must be a list of scalars, got {value!r}"
        raise MalformedMutationError(msg)
    return tuple(value)


def _cell(document: Any, name: str, keys: Sequence[str] = _CELL_KEYS) -> Cell:
    if not isinstance(document, dict):
        msg = f"{name} must be an object, got {document!r}"
        raise MalformedMutationError(msg)
    reject_unknown_keys(document, keys, where=name, error=MalformedMutationError)
    write_time = _int(document, "write_time", where=name, optional=False) or 0
    ttl_s = _int(document, "ttl_s", where=name, minimum=1)
    value: JsonValue = document.get("value")
    return Cell(value=value, write_time=write_time, ttl_s=ttl_s)


def _marker(document: Any) -> Cell:
    """The row marker an INSERT sets: a cell whose value is always True (so it has no `value`)."""
    cell = _cell(document, "liveness", _LIVENESS_KEYS)
    return Cell(value=True, write_time=cell.write_time, ttl_s=cell.ttl_s)


def cells_from_json(document: Any) -> dict[str, Cell]:
    """The `cells` object of a mutation document."""
    if document is None:
        return {}
    if not isinstance(document, dict):
        msg = f"field 'cells' must be an object, got {document!r}"
        raise MalformedMutationError(msg)
    return {str(column): _cell(cell, f"cell {column!r}") for column, cell in document.items()}


def cells_to_json(cells: Mapping[str, Cell]) -> dict[str, dict[str, JsonValue]]:
    """The `cells` object of a mutation document."""
    return {
        column: {"value": cell.value, "write_time": cell.write_time, "ttl_s": cell.ttl_s}
        for column, cell in cells.items()
    }


def mutation_from_json(document: Any) -> Mutation:
    """Build a Mutation from its JSON document; MalformedMutationError names what is wrong."""
    if not isinstance(document, dict):
        msg = f"a mutation must be a JSON object, got {document!r}"
        raise MalformedMutationError(msg)
    reject_unknown_keys(
        document, _MUTATION_KEYS, where="the mutation", error=MalformedMutationError
    )
    table = document.get("table")
    if not isinstance(table, str):
        msg = f"field 'table' must be a string, got {table!r}"
        raise MalformedMutationError(msg)
    audit = document.get("audit")
    if not isinstance(audit, dict) or not isinstance(audit.get("source"), str):
        msg = "field 'audit' must be an object with a string 'source'"
        raise MalformedMutationError(msg)
    reject_unknown_keys(audit, _AUDIT_KEYS, where="field 'audit'", error=MalformedMutationError)
    liveness = document.get("liveness")
    return Mutation(
        table=table,
        partition_key=_key(document, "partition_key"),
        clustering_key=_key(document, "clustering_key"),
        cells=cells_from_json(document.get("cells")),
        liveness=None if liveness is None else _marker(liveness),
        row_deleted_at=_int(document, "row_deleted_at"),
        partition_deleted_at=_int(document, "partition_deleted_at"),
        schema_id=_int(document, "schema_id"),
        audit=Audit(
            source=audit["source"],
            replica=_text(audit, "replica", where="audit"),
            segment=_text(audit, "segment", where="audit"),
            position=_int(audit, "position", where="audit", minimum=0) or 0,
            captured_at_us=_int(audit, "captured_at_us", where="audit", minimum=0) or 0,
        ),
    )


def mutation_to_json(mutation: Mutation) -> dict[str, JsonValue]:
    """The JSON document of a mutation (inverse of `mutation_from_json`)."""
    liveness = mutation.liveness
    audit = mutation.audit
    return {
        "table": mutation.table,
        "partition_key": list(mutation.partition_key),
        "clustering_key": list(mutation.clustering_key),
        "cells": dict(cells_to_json(mutation.cells)),
        "liveness": None
        if liveness is None
        else {"write_time": liveness.write_time, "ttl_s": liveness.ttl_s},
        "row_deleted_at": mutation.row_deleted_at,
        "partition_deleted_at": mutation.partition_deleted_at,
        "schema_id": mutation.schema_id,
        "audit": {
            "source": audit.source,
            "replica": audit.replica,
            "segment": audit.segment,
            "position": audit.position,
            "captured_at_us": audit.captured_at_us,
        },
    }


def line_location(line_nr: int, source: str = "") -> str:
    """`line N`, or `line N of SOURCE`: how ingestion errors point at the line to fix."""
    return f"line {line_nr} of {source}" if source else f"line {line_nr}"


def parse_mutation_line(line: str, *, line_nr: int = 0, source: str = "") -> Mutation:
    """One line of a JSON lines file; the error names the line number (and `source`, if given).

    Standard JSON only (`USER_JSON_DECODER`): a NaN would reach the change log, the messages and
    the materialized table (as NULL), and a NaN key would fail the materializer at every restart.
    """
    try:
        return mutation_from_json(decode_json(line, USER_JSON_DECODER))
    except (ValueError, MalformedMutationError) as exc:
        msg = f"{line_location(line_nr, source)}: {exc}"
        raise MalformedMutationError(msg) from exc
