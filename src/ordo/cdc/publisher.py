"""The publisher: single-row mutations routed by primary-key hash into each table's change log.

Seed 003's CDC publisher breaks commit-log mutations into single-row updates and publishes each to
the table's stream keyed by its partition key, so all writes of a key land in one partition in
order. Publishing is idempotent: mutations whose position the log already holds for their segment
are skipped, so a capture that crashed between publishing and advancing its source publishes
nothing twice when it re-reads the same changes. A mutation without a position (0, which no
capture produces) cannot be recognised again, so it is always published.

Both rest on a table's partition count never changing: the log records it with the first publish,
a publisher given another count is refused before it writes anything, and one given none
follows each table's log (DEFAULT_PARTITIONS for a new one).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ordo.cdc.change_rows import ChangeRows, key_text
from ordo.cdc.mutation import Key, Mutation
from ordo.cdc.ports import ChangeLogWriter
from ordo.errors import MalformedMutationError
from ordo.hashing import stable_hash
from ordo.settings.loading import integer_in

DEFAULT_PARTITIONS = 8
"""The partition count of a new table's change log when the publisher is given none."""


def partition_of(partition_key: Key, partitions: int) -> int:
    """The change log partition of a partition key: a stable hash, the same in every process.

    ConfigurationError unless `partitions` is an int in 1..2**53-1, as a publisher's count:
    0 was a ZeroDivisionError, and 1.5 answered 0.0, which names no partition directory.
    MalformedMutationError, as for a mutation's key, unless `partition_key` is a non-empty
    tuple of values JSON can carry: "abc" was routed as the key ("a", "b", "c"), a list or ()
    answered a partition no mutation has, and None or NaN was a bare TypeError or ValueError.
    """
    integer_in("partitions", partitions, 1)
    if not isinstance(partition_key, tuple) or not partition_key:
        msg = f"a partition key must be a non-empty tuple of column values, got {partition_key!r}"
        raise MalformedMutationError(msg)
    try:
        text = key_text(partition_key)
    except (TypeError, ValueError) as exc:  # from the JSON encoder only
        msg = f"partition key {partition_key!r}: {exc}"
        raise MalformedMutationError(msg) from exc
    return stable_hash(text) % partitions


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishReceipt:
    """What one publish wrote: mutations per table, and how many were already in the log."""

    published: dict[str, int]
    skipped: int


class Publisher:
    """Routes mutations to the partitions of each table of `log` (not thread-safe).

    `partitions` is the count every table's log must have; None follows each log's own count,
    and gives a new log DEFAULT_PARTITIONS. A count other than a log's is refused
    (PartitionCountMismatchError) before anything is written.
    """

    def __init__(self, log: ChangeLogWriter, *, partitions: int | None = None) -> None:
        """ConfigurationError unless `partitions` is None or an int in 1..2**53-1 (as --partitions).

        The count is recorded with a table's first publish: True or 1.5 was written to the
        log's record, which every later publish then refused as holding no count.
        """
        if partitions is not None:
            integer_in("partitions", partitions, 1)
        self.log, self.partitions = log, partitions

    def settle(self, tables: Iterable[str]) -> dict[str, int]:
        """The partition count each table is published with; writes nothing.

        PartitionCountMismatchError when a table's log has another count than the one this
        publisher was given. A command calls this with every table it will publish before it
        changes anything (installs triggers, publishes a first input), so that a wrong count is
        refused with nothing done; `publish_rows` calls it too.
        """
        return {
            table: self.log.settled_partitions(
                table, requested=self.partitions, default=DEFAULT_PARTITIONS
            )
            for table in dict.fromkeys(tables)
        }

    def check(self, rows: ChangeRows) -> dict[str, int]:
        """`settle` the tables of `rows`, and have the log check their segments; writes nothing.

        For a command that checks every input before it publishes any (`cdc ingest`).
        """
        for segment in set(rows.column("segment")):
            self.log.check_segment(segment)
        return self.settle(rows.column("table"))

    def publish(self, mutations: Sequence[Mutation]) -> PublishReceipt:
        """Append `mutations` (commit order) to their partitions, keeping that order per key."""
        return self.publish_rows(ChangeRows.from_mutations(mutations))

    def publish_rows(self, rows: ChangeRows) -> PublishReceipt:
        """Append `rows` (commit order) to their partitions, keeping that order per key.

        One file per (table, partition, segment), and another for the segment's mutations
        without a position: a file name states the positions of one segment, which is what
        deduplication reads back. A table's files are written in one `append`, so they become
        visible together. Every table's partition count is settled, and every segment checked
        (`check`), before anything is written; a count is recorded before its table's files are.
        """
        counts = self.check(rows)
        routed: dict[tuple[str, int, str, bool], list[int]] = defaultdict(list)
        positions = rows.column("position")
        for index, (table, key, segment) in enumerate(
            zip(
                rows.column("table"),
                rows.column("partition_key"),
                rows.column("segment"),
                strict=True,
            )
        ):
            partition = stable_hash(key) % counts[table]
            routed[table, partition, segment, positions[index] > 0].append(index)
        skipped = 0
        files: dict[str, list[tuple[int, ChangeRows]]] = defaultdict(list)
        for (table, partition, segment, has_position), indices in sorted(routed.items()):
            held = self.log.last_position(table, segment, partition) if has_position else None
            fresh = indices if held is None else [i for i in indices if positions[i] > held]
            skipped += len(indices) - len(fresh)
            if fresh:
                files[table].append((partition, rows.take(fresh)))
        for table, count in counts.items():
            self.log.record_partitions(table, count)
        for table, table_files in files.items():
            self.log.append(table, table_files)
        published = {table: sum(len(r) for _, r in fs) for table, fs in files.items()}
        return PublishReceipt(published=published, skipped=skipped)
