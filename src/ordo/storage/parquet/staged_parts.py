"""The hidden parts a change log publish writes its files to, and those a dead publisher left.

Each file of a publish is written and synced as `.<name>.<uuid>.tmp` (hidden from Spark's and
pyarrow's listings) and renamed to `<name>` once every file of the publish is. A publisher killed
in between (kill -9, a power cut) leaves its parts behind: nothing reads them, and nothing
removed them either, so every such crash kept a publish's worth of disk (a snapshot's, all of
it) for good. A publisher removes its own segment's leftovers before it first writes there,
and those of a publish of its own that failed or that Ctrl-C interrupted.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ordo.storage.parquet.file_name import token_of


def part_name(suffix: str) -> re.Pattern[str]:
    """The names `write_part` gives its hidden parts of `suffix`: the file it becomes, a uuid."""
    return re.compile(rf"^\.(?P<name>.+\.parquet)\.[0-9a-f]{{32}}\.{re.escape(suffix)}$")


_PART = part_name("tmp")
"""A publish's hidden part (`write_part`'s default suffix)."""


def write_part(final: Path, table: pa.Table, *, suffix: str = "tmp") -> Path:
    """Write `table` to a hidden part beside `final`, synced; returns the part's path.

    Synced so that the file is durable once renamed, before the source may forget its changes.
    A write that fails (a full disk, say) leaves no part behind. The part is named
    `.<final name>.<uuid>.<suffix>`: a publish's end in `tmp` (`remove_left_parts` removes
    them), a compaction's in another suffix, which no publisher ever removes.
    """
    part = final.with_name(f".{final.name}.{uuid.uuid4().hex}.{suffix}")
    try:
        with part.open("wb") as file:
            pq.write_table(table, file)
            file.flush()
            os.fsync(file.fileno())
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return part


def remove_left_parts(directory: Path, names: Iterable[str], token: str) -> None:
    """Remove the hidden parts of segment `token`'s files among `names`, entries of `directory`.

    For a publisher about to write the segment's first file there, or whose publish there
    stopped: a segment has one writer, so a part of its own found then is one a publisher of the
    segment left when it died, or this one's. Other segments' parts may be another publisher's,
    being written: they are left alone.
    """
    for name in names:
        part = _PART.match(name)
        if part is not None and token_of(part["name"]) == token:
            (directory / name).unlink(missing_ok=True)
