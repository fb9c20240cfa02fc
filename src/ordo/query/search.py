"""The search for events a persistence id is missing (seed 001, "Gap detection").

`TagQuery` holds an event back when earlier ones of its persistence id are missing, and runs one
`search_round` per poll until they are found or the search's deadline passes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Generic

from ordo.errors import MissingTaggedEventError
from ordo.query.ports import R, TagViewReader
from ordo.query.tag_view_pages import key_ms, read_pages
from ordo.time import BucketSize, TimeUUID
from ordo.types import PersistenceId, Tag, TimeBucket

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class MissingSearch(Generic[R]):
    """A held-back event and the lower tag pid sequence nrs looked for before delivering it.

    `is_gap` tells a real gap (numbers after a delivered one are missing: fail at the deadline)
    from a look-back for a persistence id seen for the first time (at the deadline, the
    lowest event found is the first: `accept_first_found`).
    The search range `after < offset <= up_to` ends at the held event's offset; it only covers
    that event's bucket and the previous one. Not thread-safe.
    """

    persistence_id: PersistenceId
    held: R
    first_missing: int
    after: bytes
    up_to: bytes
    deadline_ns: int
    is_gap: bool
    found: dict[int, R] = field(default_factory=dict)

    @property
    def missing(self) -> tuple[int, ...]:
        """The tag pid sequence nrs still missing, ascending."""
        return tuple(
            n
            for n in range(self.first_missing, self.held.tag_pid_sequence_nr)
            if n not in self.found
        )

    @property
    def is_complete(self) -> bool:
        """Whether every missing event has been found."""
        return len(self.found) == self.held.tag_pid_sequence_nr - self.first_missing

    def offer(self, row: R) -> None:
        """Keep `row` if it is one of the missing events."""
        nr = row.tag_pid_sequence_nr
        if self.first_missing <= nr < self.held.tag_pid_sequence_nr:
            self.found.setdefault(nr, row)

    def deliverable(self) -> list[R]:
        """The events to deliver once the search is complete, in order: found, then held."""
        return [*(self.found[nr] for nr in sorted(self.found)), self.held]

    def accept_first_found(self, *, deadline_ns: int) -> list[R]:
        """End a first encounter's look-back at its timeout: the lowest event found is the first.

        Returns the found events from that one on that follow each other (none when nothing was
        found: the held event is the first). The search then goes on as a gap search, until
        `deadline_ns`, for the next number after them: a found event is never dropped, and the
        held one never delivered past a missing one without MissingTaggedEventError (G1).
        """
        nr = min(self.found, default=self.held.tag_pid_sequence_nr)
        rows = []
        while nr in self.found:
            rows.append(self.found.pop(nr))
            nr += 1
        self.first_missing, self.deadline_ns, self.is_gap = nr, deadline_ns, True
        if rows:
            self.after = rows[-1].offset_key
        return rows


def search_round(
    search: MissingSearch[R],
    reader: TagViewReader[R],
    *,
    tag: Tag,
    bucket_size: BucketSize,
    page: int,
) -> None:
    """Offer the search the persistence id's rows in its range, bucket by bucket, until complete.

    The range covers the held event's bucket and the one before it (no earlier than `after`).
    """
    last_bucket = bucket_size.key(key_ms(search.up_to))
    first_bucket = max(bucket_size.key(key_ms(search.after)), bucket_size.previous(last_bucket))
    bucket = first_bucket
    while bucket <= last_bucket and not search.is_complete:
        for rows in read_pages(
            reader,
            tag,
            TimeBucket(bucket),
            after=search.after,
            up_to=search.up_to,
            page=page,
            persistence_id=search.persistence_id,
        ):
            for row in rows:
                search.offer(row)
        bucket = bucket_size.next(bucket)


def found_rows(search: MissingSearch[R], *, tag: Tag) -> list[R]:
    """A complete search's rows to deliver (`deliverable`), logging the missing ones it found."""
    rows = search.deliverable()
    if len(rows) > 1:
        logger.warning(
            "found missing events: tag=%s persistence_id=%s tag_pid_sequence_nrs=%d..%d",
            tag,
            search.persistence_id,
            rows[0].tag_pid_sequence_nr,
            rows[-2].tag_pid_sequence_nr,
        )
    return rows


def missing_error(search: MissingSearch[R], *, tag: Tag) -> MissingTaggedEventError:
    """The error of a gap the search gave up on: what is missing and where it was looked for."""
    return MissingTaggedEventError(
        tag=tag,
        persistence_id=search.persistence_id,
        missing=search.missing,
        searched_after=TimeUUID.from_bytes(search.after),
        searched_up_to=TimeUUID.from_bytes(search.up_to),
        last_known_offset=TimeUUID.from_bytes(search.after),
    )
