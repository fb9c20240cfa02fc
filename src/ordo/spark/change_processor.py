"""The materializer's stateful step: folds each partition key's new mutations on the executors.

`transformWithStateInPandas` calls the processor once per group and micro-batch. Groups are
state buckets (a stable hash of the partition key, `STATE_BUCKETS` of them), not single keys:
Spark's per-group cost in Python (a pandas frame in, an Arrow batch out, about a millisecond)
would otherwise dominate, since a key typically has only a few mutations per batch. The state
is still one `PartitionState` per partition key (encoded by `ordo.cdc.state_json`), kept in
hash slots of the bucket (`ordo.spark.bucket_state`) and decoded only for keys a batch touches.

Replica copies of one write (equal content, another replica or commit log) are dropped before
they are decoded; folding them again would change nothing (last write wins is idempotent).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming.stateful_processor import (
    MapState,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
    ValueState,
)

from ordo.cdc.change_rows import (
    CHANGE_ROW_COLUMNS,
    CHANGE_ROW_TEXT_COLUMNS,
    mutation_from_values,
)
from ordo.cdc.materializer import materialize_partition
from ordo.cdc.mutation import SNAPSHOT_MARK, Mutation
from ordo.cdc.ports import SchemaVersion
from ordo.cdc.row_state import PartitionState
from ordo.cdc.schema_catalog import SchemaCatalog
from ordo.cdc.state_json import decode_state, encode_state
from ordo.spark.bucket_state import BucketState
from ordo.spark.change_rows import (
    OUTPUT_COLUMNS,
    OutputRow,
    dead_letter_row,
    message_rows,
    unreadable_row,
)
from ordo.spark.change_schemas import (
    MATERIALIZER_BUCKET_DDL,
    MATERIALIZER_SLOT_DDL,
    MATERIALIZER_SLOT_KEY_DDL,
)

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped]  # pandas ships no type hints

logger = logging.getLogger(__name__)

STATE_BUCKETS = 256
"""Groups of the stateful step. Part of the checkpoint's state layout: changing it needs a new
checkpoint. Keep it at least the number of shuffle partitions (a local master's cores,
`ordo.spark.register`), or some cores stay idle."""

INPUT_COLUMNS = CHANGE_ROW_COLUMNS
"""The change log columns the processor reads, in this order."""
BIGINT_COLUMNS = frozenset(CHANGE_ROW_COLUMNS) - CHANGE_ROW_TEXT_COLUMNS
"""Input columns the materializer casts to strings before the processor: pandas would turn a
nullable integer column into floats and round values above 2**53."""

_AUDIT = ("source", "replica", "segment", "position", "captured_at_us")
_CONTENT = [i for i, name in enumerate(INPUT_COLUMNS) if name not in _AUDIT]
"""The columns that make two rows the same write (the audit columns say where a copy came
from)."""
_KEY, _CLUSTERING, _CELLS, _VALUES, _POSITION, _SEGMENT, _REPLICA = map(
    INPUT_COLUMNS.index,
    ("partition_key", "clustering_key", "cells", "cell_values", "position", "segment", "replica"),
)
_content = itemgetter(*_CONTENT)
_EMPTY_STATE = encode_state(PartitionState())


def _delivery_key(row: tuple[Any, ...]) -> tuple[int, int, str, str, str, str, str]:
    """Snapshot rows first, then position, segment, replica, then the row and cells.

    The order replays agree on, as `ordo.cdc.materializer.delivery_order`.
    """
    position = row[_POSITION]
    return (
        0 if SNAPSHOT_MARK in (row[_SEGMENT] or "") else 1,
        -1 if position is None else int(position),  # unreadable: a dead letter anyway
        row[_SEGMENT] or "",
        row[_REPLICA] or "",
        row[_CLUSTERING] or "",
        row[_CELLS] or "",
        row[_VALUES] or "",
    )


class ChangeFoldProcessor(StatefulProcessor):
    """Folds mutations into per-key state and emits messages and dead letters.

    Picklable (it holds the sink URL and table name only); Spark gives each task its own copy,
    and `init` runs once per task, so the schema catalog is re-read at least every micro-batch.
    """

    def __init__(self, *, sink: str, table: str) -> None:
        self._sink, self._table = sink, table

    def init(self, handle: StatefulProcessorHandle) -> None:
        """Declare the state; the schema catalog opens the sink lazily (not on the driver)."""
        self._slots: MapState = handle.getMapState(
            "slots", MATERIALIZER_SLOT_KEY_DDL, MATERIALIZER_SLOT_DDL
        )
        self._bucket: ValueState = handle.getValueState("bucket", MATERIALIZER_BUCKET_DDL)
        self._catalog = SchemaCatalog(self._table, self._load_versions)

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        """Fold one bucket's new mutations, key by key; yield one frame of output rows.

        pandas is imported here, not with the module: Spark imports the module in a fresh
        process to plan each query (`init` only, ~0.2 s of pandas there); the executors'
        workers have pandas loaded already.
        """
        import pandas as pd

        records: list[tuple[Any, ...]] = []
        for frame in rows:
            records.extend(zip(*(frame[c].tolist() for c in INPUT_COLUMNS), strict=True))
        records.sort(key=_delivery_key)
        by_key: dict[str, list[tuple[Any, ...]]] = {}
        seen: set[tuple[Any, ...]] = set()
        for record in records:
            content = _content(record)
            if content not in seen:
                seen.add(content)
                by_key.setdefault(record[_KEY], []).append(record)
        bucket = BucketState(self._slots, self._bucket)
        stored = bucket.load(by_key.keys())
        output: list[OutputRow] = []
        changed: dict[str, str] = {}
        for partition_key in sorted(by_key):
            held = stored.get(partition_key)
            state = self._fold_key(partition_key, by_key[partition_key], held, output)
            if state != (_EMPTY_STATE if held is None else held):
                changed[partition_key] = state
        if changed:
            bucket.store(changed)
        if output:
            yield pd.DataFrame(output, columns=list(OUTPUT_COLUMNS), dtype=object)

    def close(self) -> None:
        """Nothing to release: the catalog opens and closes the sink per read."""

    def _fold_key(
        self,
        partition_key: str,
        records: Sequence[tuple[Any, ...]],
        held: str | None,
        output: list[OutputRow],
    ) -> str:
        """Fold one key's records, appending its output rows; returns its encoded new state."""
        mutations: list[Mutation] = []
        for record in records:
            try:
                mutations.append(mutation_from_values(record))
            except (ValueError, TypeError) as exc:  # bad JSON or fields: a dead letter
                row = dict(zip(INPUT_COLUMNS, record, strict=True))
                output.append(unreadable_row(partition_key, row, f"unreadable mutation: {exc}"))
        state = PartitionState() if held is None else decode_state(held)
        folded = materialize_partition(state, mutations, self._catalog.resolve)
        output.extend(message_rows(partition_key, folded.messages))
        output.extend(dead_letter_row(partition_key, rejected) for rejected in folded.rejected)
        return encode_state(folded.state)

    def _load_versions(self) -> Sequence[SchemaVersion]:
        from ordo.storage.open import stores_at

        with stores_at(self._sink, mode="write") as stores:
            return stores.schemas.versions(self._table)
