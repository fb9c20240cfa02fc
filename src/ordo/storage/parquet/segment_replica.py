"""Which replica published a segment into a change log, read from one of the segment's files.

A PostgreSQL capture publishes under `<slot>.<system identifier>`; an earlier ordo published
under `<slot>`, and a capture whose log holds files of that segment from its own server goes on
under it (`ordo.storage.postgres.change_segment`). The files' names do not say which server
published them; their `replica` column does.
"""

from __future__ import annotations

from collections.abc import Sequence

from ordo.storage.parquet.change_log import ParquetChangeLog
from ordo.storage.parquet.file_name import segment_token, token_of
from ordo.storage.parquet.file_reads import read_columns


def segment_replica(log: ParquetChangeLog, tables: Sequence[str], segment: str) -> str | None:
    """The replica of the first file of `segment` in the logs of `tables`; None when none is held.

    One file is read: a segment's files come from one replica, as long as no two sources share
    it (which is what the segment names avoid; a log where two servers did share `<slot>`
    answers with the replica of whichever file comes first in name order).
    """
    token = segment_token(segment)
    for table in tables:
        for _, file in log.files(table):
            if token_of(file.name) == token:
                replica = read_columns(file, ["replica"]).column("replica")[0]
                return str(replica.as_py())
    return None
