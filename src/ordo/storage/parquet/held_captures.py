"""What a change log partition holds of a segment, read from its file names and, if need be, rows.

The publisher skips every change at or below the highest position a segment has in a partition,
which the file names tell (`last_position`). A capture asks what exactly the log holds at the
positions it would skip (`captures_held`) only when it would skip some, which happens only after
a crash, or when the source's log went back: so the normal publish opens no file.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path

from ordo.storage.parquet.file_name import FILE_NAME
from ordo.storage.parquet.file_reads import read_columns


def positioned_files(names: Iterable[str], token: str) -> Iterator[tuple[str, int, int]]:
    """Each file of the segment `token` among `names` with positions: (name, lowest, highest)."""
    for name in names:
        match = FILE_NAME.match(name)
        if match is not None and match["segment"] == token:
            yield name, int(match["lowest"]), int(match["highest"])


def captures_held(
    directory: Path, names: Iterable[str], token: str, positions: Collection[int]
) -> dict[int, set[int]]:
    """The `captured_at_us` of the rows of segment `token` at each of `positions` in `directory`.

    A position no row holds is absent. Only the files whose names' ranges hold one of
    `positions` are read, and only two of their columns.
    """
    wanted = set(positions)
    ordered = sorted(wanted)
    held: dict[int, set[int]] = {}
    for name, lowest, highest in positioned_files(names, token):
        first = bisect_left(ordered, lowest)
        if first == len(ordered) or ordered[first] > highest:
            continue
        columns = read_columns(directory / name, ["position", "captured_at_us"]).columns
        for position, captured_at_us in zip(*(c.to_pylist() for c in columns), strict=True):
            if position in wanted:
                held.setdefault(position, set()).add(captured_at_us)
    return held
