"""The search for events a persistence id is missing (seed 001, "Gap detection")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic

from ordo.query.ports import R
from ordo.types import PersistenceId


@dataclass(slots=True)
class MissingSearch(Generic[R]):
    """A held-back event and the lower tag pid sequence nrs looked for before delivering it.

    `is_gap` tells a real gap (numbers after a delivered one are missing: fail at the deadline)
    from a look-back for a persistence id seen for the first time (accept at the deadline).
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
        """The events to deliver, in order.

        All of them when the search is complete; otherwise the contiguous run that ends at the
        held event (for a first encounter whose look-back timed out).
        """
        rows = [self.held]
        nr = self.held.tag_pid_sequence_nr - 1
        while nr in self.found:
            rows.append(self.found[nr])
            nr -= 1
        rows.reverse()
        return rows
