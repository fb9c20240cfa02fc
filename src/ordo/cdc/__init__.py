"""Change data capture (seed 003): raw row mutations in, ordered full-row change messages out.

The pure core lives here: the mutation model with Cassandra's semantics, last-write-wins
reconciliation, the fold that turns mutations into CREATE/UPDATE/DELETE messages with full
`before` and `after` rows, schemas and their compatibility, the publisher's routing. Captures,
the change log files and the Spark materializer are adapters in `ordo.storage` and `ordo.spark`.
"""

from ordo.cdc.change import ChangeMessage, ChangeOp, fold, mutation_problems
from ordo.cdc.column_type import ColumnType
from ordo.cdc.mutation import Audit, Cell, JsonValue, Key, Mutation
from ordo.cdc.mutation_json import mutation_from_json, mutation_to_json
from ordo.cdc.ports import (
    CapturedWindow,
    ChangeLogWriter,
    ChangeSource,
    SchemaVersion,
    SourceStatus,
)
from ordo.cdc.publisher import Publisher, PublishReceipt, partition_of
from ordo.cdc.row_state import PartitionState, RowState, reconcile
from ordo.cdc.schema import Column, TableSchema
from ordo.cdc.schema_registry import SchemaRegistry

__all__ = [
    "Audit",
    "CapturedWindow",
    "Cell",
    "ChangeLogWriter",
    "ChangeMessage",
    "ChangeOp",
    "ChangeSource",
    "Column",
    "ColumnType",
    "JsonValue",
    "Key",
    "Mutation",
    "PartitionState",
    "PublishReceipt",
    "Publisher",
    "RowState",
    "SchemaRegistry",
    "SchemaVersion",
    "SourceStatus",
    "TableSchema",
    "fold",
    "mutation_from_json",
    "mutation_problems",
    "mutation_to_json",
    "partition_of",
    "reconcile",
]
