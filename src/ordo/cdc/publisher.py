"""The publisher: single-row mutations routed by primary-key hash into each table's change log.

Seed 003's CDC publisher breaks commit-log mutations into single-row updates and publishes each to
the table's stream keyed by its partition key, so all writes of a key land in one partition in
order. Publishing is idempotent: mutations whose position the log already holds for their segment
are skipped, so a capture that crashed between publishing and advancing its source publishes
nothing twice when it re-reads the same changes. A mutation without a position (0, which no
capture produces) cannot be recognised again, so it is always published.

A skipped mutation must be the one the log holds at its position (`check_skipped`, on unless
ingesting): a capture's positions are its source's own log positions, so another change there
means the source's log went back, and it is refused (SourceRewoundError) rather than lost.

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
from ordo.errors import MalformedMutationError, SourceRewoundError
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

    def publish_rows(self, rows: ChangeRows, *, check_skipped: bool = True) -> PublishReceipt:
        """Append `rows` (commit order) to their partitions, keeping that order per key.

        One file per (table, partition, segment), and another for the segment's mutations
        without a position: a file name states the positions of one segment, which is what
        deduplication reads back. A table's files are written in one `append`, so they become
        visible together. Every table's partition count is settled, and every segment checked
        (`check`), before anything is written; a count is recorded before its table's files are.

        A mutation at or below the last position its segment has in its partition is skipped.
        With `check_skipped` (captures), each must be held there at its position with its
        `captured_at_us`, or SourceRewoundError is raised before anything is written
        (`_lowest_not_held`), naming the lowest position not held of every partition: the
        first change (in commit order) the capture would skip, where the source went back, not
        the lowest of the first partition looked at. Ingesting turns it off: a producer's file
        owns its audit, whose `captured_at_us` may be 0 or the time it was converted (a commit
        log converted again repeats its positions at other times), and whose positions must
        grow within a segment (docs/cdc.md): what is at or below the last is skipped as
        published, quietly.
        """
        counts = self.check(rows)
        routed: dict[tuple[str, int, str, bool], list[int]] = defaultdict(list)
        positions, captured = rows.column("position"), rows.column("captured_at_us")
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
        rewound: list[tuple[int, str, str]] = []  # (lowest position not held, table, segment)
        for (table, partition, segment, has_position), indices in sorted(routed.items()):
            held = self.log.last_position(table, segment, partition) if has_position else None
            fresh = indices if held is None else [i for i in indices if positions[i] > held]
            if check_skipped and len(fresh) < len(indices):
                repeated = {positions[i]: captured[i] for i in indices if positions[i] <= held}
                lowest = _lowest_not_held(self.log, table, segment, partition, repeated)
                if lowest is not None:
                    rewound.append((lowest, table, segment))
            skipped += len(indices) - len(fresh)
            if fresh:
                files[table].append((partition, rows.take(fresh)))
        if rewound:
            position, table, segment = min(rewound)
            raise SourceRewoundError(table=table, segment=segment, position=position)
        for table, count in counts.items():
            self.log.record_partitions(table, count)
        for table, table_files in files.items():
            self.log.append(table, table_files)
        published = {table: sum(len(r) for _, r in fs) for table, fs in files.items()}
        return PublishReceipt(published=published, skipped=skipped)


def _lowest_not_held(
    log: ChangeLogWriter, table: str, segment: str, partition: int, repeated: dict[int, int]
) -> int | None:
    """The lowest position of `repeated` the log does not hold with its capture time, if any.

    `repeated` maps the positions a publish would skip in one partition to their mutations'
    `captured_at_us`. A capture that crashed before advancing its source peeks the same
    commits again, with the same positions and commit times; a different commit at a position
    the log holds or has passed means the source's log went back (restored, or failed over to
    a standby that lagged) under the same segment, and skipped, its changes would be lost and
    the source advanced past them. Rows are read only here, when something would be skipped.
    """
    held = log.captures_at(table, segment, partition, repeated.keys())
    return min(
        (p for p, captured_at_us in repeated.items() if captured_at_us not in held.get(p, ())),
        default=None,
    )
