"""The planner's reads: tag_views keys as KeyRuns, pages summarised with numpy.

Planning a micro-batch runs the events-by-tag state machine on the driver, serially, before
any executor starts. Fed one key per row it costs about 3 µs a row in Python; fed a page of
50,000 keys summarised per persistence id (one run each, when its tag pid sequence nrs are
consecutive in offset order) it decides per id instead, and the page itself comes packed by
the database (ordo.storage.packed_reads) and is summarised by numpy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow.compute as pc

from ordo.query import KeyRun, RunPage, TagViewKey, TagViewReader
from ordo.spark.packed_arrow import greatest_key, packed_table
from ordo.storage.packed_reads import PackedPageReader, PackedRows, Packing
from ordo.types import PersistenceId, Tag, TimeBucket

KEY_COLUMNS = (
    ("timeuuid", Packing.KEY),
    ("persistence_id", Packing.TEXT),
    ("tag_pid_sequence_nr", Packing.INT),
)


class KeyRunReader:
    """Single-row KeyRuns for the state machine's row-by-row reads, summarised pages besides."""

    def __init__(self, keys: TagViewReader[TagViewKey], pages: PackedPageReader) -> None:
        self._keys = keys
        self._pages = pages

    def read_tag_view(
        self,
        tag: Tag,
        time_bucket: TimeBucket,
        *,
        after: bytes,
        up_to: bytes,
        limit: int,
        persistence_id: PersistenceId | None = None,
        hash_mask: tuple[int, int] | None = None,
    ) -> Sequence[KeyRun]:
        """The keys reader's rows, each as a run of one."""
        rows = self._keys.read_tag_view(
            tag,
            time_bucket,
            after=after,
            up_to=up_to,
            limit=limit,
            persistence_id=persistence_id,
            hash_mask=hash_mask,
        )
        return [KeyRun(key, nr, key, pid, nr) for key, pid, nr in rows]

    def read_runs(
        self, tag: Tag, time_bucket: TimeBucket, *, after: bytes, up_to: bytes, limit: int
    ) -> RunPage:
        """The page of keys, one run per persistence id (None if an id's rows are not one)."""
        page = self._pages.read_packed(
            tag, time_bucket, after=after, up_to=up_to, limit=limit, columns=KEY_COLUMNS
        )
        if not page.count:
            return RunPage(runs=[], row_count=0, last_key=b"")
        keys = page.keys["timeuuid"]
        return RunPage(runs=_runs(page), row_count=page.count, last_key=greatest_key(keys))


def _runs(page: PackedRows) -> list[KeyRun] | None:
    """Group the page's rows by persistence id, in offset order inside each id.

    One lexsort orders the rows by id (dictionary code), then offset (the 16-byte key as two
    big-endian words), then tag pid sequence nr; each id's nrs must then step by exactly one
    (no gap, duplicate or reordering).
    """
    keys = page.keys["timeuuid"]
    words = np.frombuffer(keys, dtype=">u8").reshape(-1, 2)
    table = packed_table(page, KEY_COLUMNS)
    ids = pc.dictionary_encode(table["persistence_id"]).combine_chunks()
    codes = ids.indices.to_numpy()
    nrs = table["tag_pid_sequence_nr"].to_numpy()
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
