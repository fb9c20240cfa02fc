"""A compact JSON encoding of `PartitionState`: what the materializer keeps per partition key.

The Spark materializer stores one of these per partition key in its state store and reads it
back at every micro-batch that touches the key, so it is small and cheap to decode, and it is
plain JSON (not pickle) so a checkpoint survives Python and ordo upgrades. Version 1::

    [1, deleted_at, now, [row, ...]]
    row  = [clustering_key, deleted_at, liveness, {column: cell, ...}]
    cell = [value, write_time] or [value, write_time, ttl_s]
    liveness = null, [write_time] or [write_time, ttl_s]

`deleted_at` and `now` are null for "never" (row_state.NEVER). Changing this layout is a
stored-format change: add a version, keep reading version 1.
"""

from __future__ import annotations

import json
from typing import Any

from ordo.cdc.mutation import Cell
from ordo.cdc.row_state import NEVER, PartitionState, RowState
from ordo.errors import CdcError

VERSION = 1
_ENCODER = json.JSONEncoder(separators=(",", ":"))
"""One encoder for every call: json.dumps with arguments builds a new one each time."""


def _cell(cell: Cell) -> list[Any]:
    if cell.ttl_s is None:
        return [cell.value, cell.write_time]
    return [cell.value, cell.write_time, cell.ttl_s]


def _liveness(cell: Cell | None) -> list[int] | None:
    if cell is None:
        return None
    return [cell.write_time] if cell.ttl_s is None else [cell.write_time, cell.ttl_s]


def _time(value: int) -> int | None:
    return None if value == NEVER else value


def encode_state(state: PartitionState) -> str:
    """The state as compact JSON text (see the module docstring)."""
    rows = [
        [
            list(clustering_key),
            _time(row.deleted_at),
            _liveness(row.liveness),
            {column: _cell(cell) for column, cell in row.cells.items()},
        ]
        for clustering_key, row in state.rows.items()
    ]
    document = [VERSION, _time(state.deleted_at), _time(state.now), rows]
    return _ENCODER.encode(document)


def decode_state(text: str | bytes) -> PartitionState:
    """The state `encode_state` wrote; CdcError when `text` is not one (a corrupt state)."""
    try:
        version, deleted_at, now, rows = json.loads(text)
        if version != VERSION:
            msg = f"partition state has version {version}, expected {VERSION}"
            raise CdcError(msg)
        return PartitionState(
            rows={
                tuple(clustering_key): RowState(
                    cells={
                        column: Cell(
                            value=cell[0],
                            write_time=cell[1],
                            ttl_s=cell[2] if len(cell) > 2 else None,
                        )
                        for column, cell in cells.items()
                    },
                    liveness=None
                    if liveness is None
                    else Cell(
                        value=True,
                        write_time=liveness[0],
                        ttl_s=liveness[1] if len(liveness) > 1 else None,
                    ),
                    deleted_at=NEVER if row_deleted_at is None else row_deleted_at,
                )
                for clustering_key, row_deleted_at, liveness, cells in rows
            },
            deleted_at=NEVER if deleted_at is None else deleted_at,
            now=NEVER if now is None else now,
        )
    except (ValueError, TypeError, IndexError, AttributeError) as exc:
        msg = f"not an encoded partition state: {exc}"
        raise CdcError(msg) from exc
