"""Errors of writing the journal."""

from __future__ import annotations

from ordo.errors.root import OrdoError
from ordo.errors.storage import StorageError, StorageIntegrityError, StorageUnavailableError
from ordo.wording import counted


class ConcurrencyConflictError(StorageIntegrityError):
    """Optimistic concurrency failed: another writer appended to the persistence id first.

    `expected` is the caller's expected sequence nr, or, for an append that gave none
    (`is_implicit`), the one the journal last knew of: the append is stopped all the same, so
    that a writer learns of another one; appending again appends after it.
    """

    def __init__(
        self, *, persistence_id: str, expected: int, actual: int, is_implicit: bool = False
    ) -> None:
        self.persistence_id, self.expected, self.actual = persistence_id, expected, actual
        self.is_implicit = is_implicit
        if is_implicit:
            msg = (
                f"persistence_id={persistence_id!r}: another writer appended since this journal "
                f"did (it knew sequence_nr {expected}, the journal is at {actual}); nothing was "
                "written, append again to append after it"
            )
        else:
            msg = (
                f"persistence_id={persistence_id!r}: expected sequence_nr {expected} "
                f"but the journal is at {actual}"
            )
        super().__init__(msg)


class AppendStoppedError(OrdoError):
    """A run of appends (`ordo append`) stopped part way: the appends before it stay written.

    Each persistence id's append is atomic on its own; the error says where the run stopped
    and what is already written, so that the input can be resumed from that line.
    """

    def __init__(self, *, line: int, appended_events: int, cause: OrdoError) -> None:
        self.line, self.appended_events, self.cause = line, appended_events, cause
        events = counted(appended_events, "event")
        if line > 2:
            written = f"the appends of lines 1-{line - 1} were written ({events})"
        elif line == 2:
            written = f"the append of line 1 was written ({events})"
        else:
            written = "nothing was written"
        super().__init__(f"line {line}: {type(cause).__name__}: {cause}; {written}")


class JournalClosedError(OrdoError):
    """The journal (or its tag writer) was used after close()."""


_RECOVERY = (
    "the events appended are in the journal: once the store is fixed, open the journal again, "
    "and recovery writes their tag views as each persistence id is started (its first append "
    "or recover()); `ordo verify --repair` completes them all"
)


class TagWriteFailedError(StorageError):
    """A tag write failed with an error no retry mends; the journal refuses appends from then on.

    `cause` is the StorageError that is not an outage (`ordo.reconnection.is_outage`): a
    tag_views table dropped, write access to it revoked, an integrity error. The tag writers
    stop retrying (the failure is logged once, at ERROR), and every later append() is refused
    with this before it writes anything, so that the journal does not run ahead of its tag
    views without bound. A StorageError that is no outage: code that retries outages stops.
    """

    def __init__(self, *, tag: str, cause: StorageError) -> None:
        self.tag, self.cause = tag, cause
        super().__init__(
            f"tag={tag!r}: writing its tag views failed, which no retry mends "
            f"({type(cause).__name__}: {cause}); this journal refuses appends: {_RECOVERY}"
        )


class TagWriteBacklogError(StorageUnavailableError):
    """A tag's writer holds more events unwritten than `max_buffer_size` and cannot write them.

    The tag views cannot be written now (`cause`, the last storage error: an outage) while the
    journal could still append: the append is refused before it writes anything, so that
    memory does not grow without bound; appends work again once the backlog is written (the
    journal's flusher retries it, and so does each refused append). An outage
    (StorageUnavailableError): code that retries outages retries the append.
    """

    def __init__(self, *, tag: str, buffered: int, limit: int, cause: StorageError) -> None:
        self.tag, self.buffered, self.limit, self.cause = tag, buffered, limit, cause
        super().__init__(
            f"tag={tag!r}: {buffered} events wait to be written to its tag views, more than "
            f"max_buffer_size ({limit}), and the last write failed ({type(cause).__name__}: "
            f"{cause}); nothing was appended: append again once the store is back"
        )


class WriterLeaseLostError(StorageError):
    """The journal's writer lease was not renewed in time: the journal refuses appends.

    The operations tools take a lease not renewed within their `writer_lease_timeout` for a
    crashed writer's, and may change its persistence ids (reconcile, cleanup); a journal
    appending meanwhile would write under them. So a journal whose lease renewal failed with
    an error no retry mends, or has not succeeded for WRITER_LEASE_DEADLINE, refuses every
    later append. `cause` is the last renewal's error (None if none failed: the heartbeat was
    late). Open the journal again: it reads each persistence id's state anew.
    """

    def __init__(self, *, writer_uuid: str, reason: str, cause: StorageError | None) -> None:
        self.writer_uuid, self.cause = writer_uuid, cause
        failed = "" if cause is None else f" ({type(cause).__name__}: {cause})"
        super().__init__(
            f"writer_uuid={writer_uuid}: the writer lease {reason}{failed}, so the operations "
            "tools may take this writer for a crashed one; this journal refuses appends: open "
            "it again once the store is fixed"
        )
