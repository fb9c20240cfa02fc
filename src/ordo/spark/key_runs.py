"""The planner's summarised pages: tag_views keys as one KeyRun per persistence id, with numpy.

Planning a micro-batch runs the events-by-tag state machine on the driver, serially, before
any executor starts. Fed one key per row it costs about 3 µs a row in Python; fed a page of
50,000 keys summarised per persistence id (one run each, when its tag pid sequence nrs are
consecutive in offset order) it decides per id instead, and the page itself comes packed by
the database (ordo.storage.packed_reads) and is summarised by numpy.
"""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from ordo.query import KeyRun, RunPage, TagViewPage
from ordo.spark.packed_arrow import int_values, packed_table
from ordo.storage.packed_reads import TAG_VIEW_KEY_PACKING, PackedPageReader, PackedRows


class KeyRunReader:
    """The query's RunReader over a store's packed pages."""

    def __init__(self, pages: PackedPageReader) -> None:
        self._pages = pages

    def read_runs(self, page: TagViewPage) -> RunPage:
        """The page of keys, one run per persistence id (None if an id's rows are not one)."""
        rows = self._pages.read_packed(page, TAG_VIEW_KEY_PACKING)
        return RunPage(runs=_runs(rows) if rows.count else [], row_count=rows.count)


def _runs(page: PackedRows) -> list[KeyRun] | None:
    """Group the page's rows by persistence id, in offset order inside each id.

    One lexsort orders the rows by id (dictionary code), then offset (the 16-byte key as two
    big-endian words), then tag pid sequence nr; each id's nrs must then step by exactly one
    (no gap, duplicate or reordering).
    """
    keys = page.keys["timeuuid"]
    words = np.frombuffer(keys, dtype=">u8").reshape(-1, 2)
    table = packed_table(page, TAG_VIEW_KEY_PACKING)
    ids = pc.dictionary_encode(table["persistence_id"]).combine_chunks()
    codes = int_values(ids.indices)
    nrs = int_values(table["tag_pid_sequence_nr"])
    order = np.lexsort((nrs, words[:, 1], words[:, 0], codes))
    codes, nrs = codes[order], nrs[order]
    same_id = codes[1:] == codes[:-1]
    if not np.all(np.diff(nrs)[same_id] == 1):
        return None
    starts = np.flatnonzero(np.concatenate(([True], ~same_id)))
    ends = np.append(starts[1:], len(codes)) - 1
    names = ids.dictionary.to_pylist()
    return [
        KeyRun(
            keys[16 * first : 16 * first + 16],
            first_nr,
            keys[16 * last : 16 * last + 16],
            names[code],
            last_nr,
        )
        for code, first, last, first_nr, last_nr in zip(
            codes[starts].tolist(),
            order[starts].tolist(),
            order[ends].tolist(),
            nrs[starts].tolist(),
            nrs[ends].tolist(),
            strict=True,
        )
    ]
