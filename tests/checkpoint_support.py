"""Spark checkpoints as an older ordo left them: offsets that name no journal."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path


def without_journal_ids(checkpoint: Path) -> int:
    """Take `journal_id` out of every offset in `checkpoint`'s offset log; how many had one.

    Spark writes `offsets/<batch id>` as a version line, the batch's metadata and the source's
    offset as JSON; the local file system keeps a checksum beside it (`.<batch id>.crc`), which
    is removed, as Spark would refuse the changed file (it reads one without a checksum).
    """
    had = 0
    for entry in sorted((checkpoint / "offsets").iterdir()):
        if not entry.name.isdigit():
            continue
        *head, source = entry.read_text(encoding="utf-8").splitlines()
        offset = json.loads(source)
        had += offset.pop("journal_id", None) is not None
        entry.write_text("\n".join([*head, json.dumps(offset)]), encoding="utf-8")
        (entry.parent / f".{entry.name}.crc").unlink(missing_ok=True)
    return had


def journal_id_of(database: Path) -> str | None:
    """The id an SQLite journal records in `ordo_metadata`, read without opening it with ordo."""
    with closing(sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True)) as conn:
        row = conn.execute("SELECT value FROM ordo_metadata WHERE key = 'journal_id'").fetchone()
    return None if row is None else str(row[0])
