r"""One JSON form per key value of a column type: so a fold key is one row of the sink.

The fold keys a row by the JSON text of its key (`key_text`: routing, the fold state, the
messages); a sink keys it by the value its key column holds. Two JSON forms of one value were
two fold keys for one row of the sink (and of an SQLite or PostgreSQL table of the type), so
deleting a row under one form emptied the table while the fold still held the row under the
other (G6). Ingested keys come in whatever forms a producer writes; ingestion gives each the
form its column type has, the one both captures write:

- double: a double, `-0.0` as `0.0` (`1`, `1.0` and `1e0` are `1.0`; an integer beyond 2**53
  the double a DOUBLE PRECISION or REAL column holds for it);
- decimal: the number's text, which a sink's key column holds (`1` and `"1"` are `"1"`; its
  text forms stay keys of their own: `"1.0"` and `"1e0"` are other keys, see `TEXT_KEY_TYPES`);
- bytes: lowercase hex without PostgreSQL's `\x` or spaces (`"AB"`, `"\\xab"` and `" ab "`
  are `"ab"`).

Every other type has one form per value. A value its type does not fit is left as it is: the
materializer dead-letters it with the reason.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from ordo.cdc.column_type import ColumnType
from ordo.cdc.mutation import Key, Mutation, Scalar
from ordo.cdc.schema import TableSchema

_SEVERAL_FORMS = frozenset({ColumnType.DOUBLE, ColumnType.DECIMAL, ColumnType.BYTES})
"""The types a key value of which JSON can give in several forms."""


def key_value_form(column_type: ColumnType, value: Scalar) -> Scalar:
    """`value` of a key column of `column_type` in its one form (see the module docstring)."""
    if column_type is ColumnType.BYTES and isinstance(value, str):
        try:
            return bytes.fromhex(value.removeprefix("\\x")).hex()
        except ValueError:
            return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if column_type is ColumnType.DOUBLE:
        try:
            return float(value) + 0.0  # -0.0 + 0.0 is 0.0
        except OverflowError:  # an integer beyond a double's range: no double's key
            return value
    if column_type is ColumnType.DECIMAL and math.isfinite(value):
        return str(value)
    return value


def _key_form(key: Key, columns: Sequence[ColumnType]) -> Key:
    """`key` with each value in its column's form; a key of another length is left as it is."""
    if len(key) != len(columns):
        return key
    return tuple(key_value_form(t, v) for t, v in zip(columns, key, strict=True))


def keyed_in_form(mutation: Mutation, schema: TableSchema) -> Mutation:
    """`mutation` with its partition and clustering keys in `schema`'s forms."""
    by_name = schema.by_name
    if all(by_name[k].type not in _SEVERAL_FORMS for k in schema.primary_key):
        return mutation
    return dataclasses.replace(
        mutation,
        partition_key=_key_form(
            mutation.partition_key, [by_name[k].type for k in schema.partition_key]
        ),
        clustering_key=_key_form(
            mutation.clustering_key, [by_name[k].type for k in schema.clustering_key]
        ),
    )
