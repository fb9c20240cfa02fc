"""What the Parquet change log tests share: mutations of one numbered column, a check that
each file of a table's log holds only keys routed to its partition, what a log holds, and the
window a publisher killed mid-publish (cdc/dying_publisher.py) publishes."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from ordo.cdc import Audit, Cell, Mutation, partition_of


def mutation_of(
    key: int, position: int, *, segment: str = "slot", table: str = "users"
) -> Mutation:
    """The row `key` of `table` with its column `n` set to `position`, at `position` of
    `segment`."""
    return Mutation(
        table=table,
        partition_key=(key,),
        cells={"n": Cell(value=position, write_time=position)},
        audit=Audit(source="test", segment=segment, position=position),
    )


KILLED_PARTITIONS = 4
"""The partition count of the killed publisher's log."""


def killed_window() -> list[Mutation]:
    """The killed publisher's window: captured changes at positions 1..40 of segment "slot",
    and ingested ones without a position of segment "agent"."""
    captured = [mutation_of(key=k, position=k) for k in range(1, 41)]
    return captured + [mutation_of(key=k, position=0, segment="agent") for k in range(1, 9)]


def misrouted_files(table: Path, partitions: int) -> list[Path]:
    """The files of the log directory `table` holding a key that routes to another partition of
    `partitions` than the one they are in: none, where the publisher routed by key."""
    return [
        file
        for file in table.glob("partition=*/*.parquet")
        if {
            partition_of(tuple(json.loads(key)), partitions)
            for key in pq.read_table(file).column("partition_key").to_pylist()
        }
        != {int(file.parent.name.removeprefix("partition="))}
    ]


def log_contents(root: Path) -> tuple[list[str], list[dict[str, object]]]:
    """The files under a change log's `root` and every row they hold (publish times left out):
    what a refused publish must leave as it was."""
    files = sorted(root.rglob("*.parquet"))
    rows = [
        row
        for file in files
        for row in pq.read_table(file).drop_columns(["published_at_us"]).to_pylist()
    ]
    return [str(file.relative_to(root)) for file in files], rows
