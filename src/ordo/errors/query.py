"""Errors of queries: a tag's missing events, a Spark query that stopped, a job running twice."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ordo.errors.root import OrdoError

if TYPE_CHECKING:
    from ordo.time import TimeUUID


class MissingTaggedEventError(OrdoError):
    """A gap in a persistence id's tag pid sequence nrs stayed open until gap_timeout.

    Seed 001's MissingTaggedEventException: the query fails loudly instead of skipping.
    Restarting a query from `last_known_offset` searches further back; events after that offset
    that were delivered before are delivered again, so downstream must be idempotent.
    """

    def __init__(
        self,
        *,
        tag: str,
        persistence_id: str,
        missing: tuple[int, ...],
        searched_after: TimeUUID,
        searched_up_to: TimeUUID,
        last_known_offset: TimeUUID,
    ) -> None:
        self.tag, self.persistence_id, self.missing = tag, persistence_id, missing
        self.searched_after, self.searched_up_to = searched_after, searched_up_to
        self.last_known_offset = last_known_offset
        shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
        msg = (
            f"missing tagged events: tag={tag!r} persistence_id={persistence_id!r} "
            f"tag_pid_sequence_nrs=[{shown}] searched ({searched_after}, {searched_up_to}]; "
            f"restart from last_known_offset={last_known_offset} to search further back"
        )
        super().__init__(msg)


class QueryFailedError(OrdoError):
    """A Spark streaming query of an ordo job stopped with an error.

    The message names the exception that stopped it; Spark's own exception is the cause.
    """


class AlreadyRunningError(OrdoError):
    """Another process runs the same job (a capture of the source, a query on the checkpoint).

    Two copies of one job would publish a source's changes twice or fight over a checkpoint;
    the second is refused before it changes anything. The message names the running copy. A
    TrackingProcessor started again while its threads run is refused with it too, and an
    `events_by_tag_at(...)` entered again inside its own `with` block.
    """
