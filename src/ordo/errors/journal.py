"""Errors of writing the journal."""

from __future__ import annotations

from ordo.errors.root import OrdoError
from ordo.errors.storage import StorageIntegrityError
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
