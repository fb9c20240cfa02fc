"""A window of the SQLite change table as the columns of `ChangeRows`, with no object per change.

The triggers write each change's key and full row as JSON; a capture window passes those texts
on as they are wherever they already are what the change log holds, so publishing a large
window costs little more than reading it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

from ordo.cdc.change_rows import ChangeRows, key_text
from ordo.cdc.json_text import parse_json
from ordo.errors import CaptureError
from ordo.storage.sqlite.change_numbers import set_aside_rounded
from ordo.storage.sqlite.change_triggers import CHANGES

_PLAIN_KEY = re.compile(r'\[(?:-?[0-9]+|"[ !#-\[\]-~]*")(?:,(?:-?[0-9]+|"[ !#-\[\]-~]*"))*\]')
"""A json_array() text of integers and printable ASCII strings without escapes: SQLite writes
those exactly as `key_text` does."""


def _key_text(sqlite_json: str) -> str:
    """The change log's key text (`key_text`) of a key as SQLite's json_array() wrote it.

    Routing and the materializer hash the text, so it must be the one `key_text` gives for the
    same key (the snapshot's keys take that path); SQLite writes floats and non-ASCII text
    differently, so anything but the plain cases is decoded and encoded again.
    """
    if _PLAIN_KEY.fullmatch(sqlite_json):
        return sqlite_json
    return key_text(tuple(parse_json(sqlite_json)))


class ChangeColumns:
    """Collects a window of change table rows as the columns of `ChangeRows`.

    Only eight columns vary between the changes of one source; the others are filled at the end.
    `json_columns` names each table's JSON columns, whose documents a double would round are
    set aside (`set_aside_rounded`).
    """

    def __init__(
        self, *, source: str, segment: str, json_columns: Mapping[str, Collection[str]]
    ) -> None:
        self._source = source
        self._segment = segment
        self._json_columns = json_columns
        self._tables: list[str] = []
        self._keys: list[str] = []
        self._values: list[str | None] = []
        self._values_times: list[int | None] = []
        self._liveness: list[int | None] = []
        self._deleted: list[int | None] = []
        self._positions: list[int] = []
        self._captured: list[int] = []

    def add(
        self,
        position: int,
        table: str,
        op: str,
        key_json: str,
        old_key_json: str | None,
        row_json: str | None,
        captured_at_us: int,
    ) -> None:
        """One change row: a delete, or an upsert (a primary-key change deletes the old key).

        CaptureError for a key that is not JSON: an infinite REAL key as triggers installed by
        an earlier ordo wrote it (`[Inf]`); today's write it as a string (see `_finite`).
        """
        is_moved = old_key_json is not None and old_key_json != key_json  # both json_array()
        try:
            key = _key_text(key_json)
            old_key = _key_text(old_key_json) if is_moved and old_key_json else None
        except ValueError as exc:
            msg = (
                f"table {table!r}: change {position} of {CHANGES} has the key {key_json}, "
                f"which is not JSON ({exc}); it cannot be published: delete that row of "
                f"{CHANGES} to go on"
            )
            raise CaptureError(msg) from exc
        if op == "D":
            self._append(table, key, position, captured_at_us, None)
            return
        if old_key is not None:
            self._append(table, old_key, position, captured_at_us, None)
        values = (
            set_aside_rounded(row_json, self._json_columns.get(table, ())) if row_json else "{}"
        )
        self._append(table, key, position, captured_at_us, values)

    def _append(
        self, table: str, key: str, position: int, captured_at_us: int, values: str | None
    ) -> None:
        """A delete (`values` None) or an upsert of the row's JSON `values` at `position`."""
        self._tables.append(table)
        self._keys.append(key)
        self._positions.append(position)
        self._captured.append(captured_at_us)
        has_cells = values is not None and values != "{}"
        self._values.append(values if has_cells else None)
        self._values_times.append(position if has_cells else None)
        self._liveness.append(None if values is None else position)
        self._deleted.append(position if values is None else None)

    def rows(self) -> ChangeRows:
        """What was added, in order."""
        count = len(self._positions)
        nothing = (None,) * count  # a tuple: four columns share it
        return ChangeRows(
            {
                "table": self._tables,
                "partition_key": self._keys,
                "clustering_key": ("[]",) * count,
                "cells": nothing,
                "cell_values": self._values,
                "cell_values_time": self._values_times,
                "liveness_time": self._liveness,
                "liveness_ttl_s": nothing,
                "row_deleted_at": self._deleted,
                "partition_deleted_at": nothing,
                "schema_id": nothing,
                "source": (self._source,) * count,
                "replica": ("",) * count,
                "segment": (self._segment,) * count,
                "position": self._positions,
                "captured_at_us": self._captured,
            }
        )
