"""The segment an SQLite source's changes are published under, recorded in the source file.

The publisher skips the positions its change log already holds for a segment (`ordo.cdc.
publisher`), so two sources publishing under one segment lose changes: the second one's are
skipped as published, then forgotten at its source. The segment was `sqlite:<file name>`,
which two files of one name (`a/app.db`, `b/app.db`) shared. A capture therefore records the
segment in the one-row table SEGMENT of the source file when it installs its change table:

- a new installation records `sqlite:<file name>.<8 random hex digits>`, unique to the file;
- an installation made before the record existed (a change table without one) records
  `sqlite:<file name>`, the segment its change log already holds positions under: under a new
  name a capture restarted after a crash between publishing and advancing would publish again
  what the log holds.

A copy of the file carries the record along: a copy captured into the change log of its
original publishes under the original's segment, and its changes at positions the log holds
or has passed stop the capture (SourceRewoundError), as those of a file restored from a copy do.
"""

from __future__ import annotations

import secrets
import sqlite3
from pathlib import Path

from ordo.storage.sqlite.change_triggers import CHANGES
from ordo.storage.sqlite.datastore import has_table

SEGMENT = "ordo_cdc_segment"
"""The one-row table in the source file that holds the segment of its capture."""
_NAME_BYTES = 40
"""The most UTF-8 bytes of the file name a new segment keeps.

A change log file is named by its segment (each byte outside letters, digits, `_` and `.`
written as three characters, see `ordo.storage.parquet.file_name`), a snapshot's segment
and the positions besides: a long file name would make a name longer than the file system's
255 bytes. The random part keeps the segment unique however little of the name is kept.
"""


def legacy_segment(path: Path) -> str:
    """The segment of an installation made before the record existed: `sqlite:<file name>`."""
    return f"sqlite:{path.name}"


def recorded_segment(conn: sqlite3.Connection) -> str | None:
    """The segment recorded in the source file; None when no capture recorded one yet."""
    if not has_table(conn, SEGMENT):
        return None
    row = conn.execute(f"SELECT segment FROM {SEGMENT}").fetchone()
    return None if row is None else str(row[0])


def record_segment(conn: sqlite3.Connection, path: Path) -> str:
    """The file's recorded segment, recorded now if it has none (see the module's docstring).

    Called in the installing write transaction before the change table is created: a change
    table already there is an installation of an earlier ordo, which keeps its segment.
    """
    recorded = recorded_segment(conn)
    if recorded is not None:
        return recorded
    if has_table(conn, CHANGES):
        segment = legacy_segment(path)
    else:  # bytes of the name that are not UTF-8 (surrogate escapes) are left out
        kept = path.name.encode("utf-8", "surrogateescape")[:_NAME_BYTES]
        segment = f"sqlite:{kept.decode('utf-8', 'ignore')}.{secrets.token_hex(4)}"
    conn.execute(f"CREATE TABLE IF NOT EXISTS {SEGMENT} (segment TEXT NOT NULL)")
    conn.execute(f"INSERT INTO {SEGMENT} (segment) VALUES (?)", (segment,))
    return segment
