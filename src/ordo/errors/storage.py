"""Errors of the storage backends, and of stores used after close or in a forked child."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ordo.errors.root import OrdoError

if TYPE_CHECKING:
    from pathlib import Path


class StorageError(OrdoError):
    """The storage backend failed; the driver's error is chained as the cause."""


class StorageUnavailableError(StorageError, ConnectionError):
    """The database cannot be reached or opened."""


class StorageAccessError(StorageUnavailableError):
    """The server is up but refuses the URL's connection, or a file its access: not an outage.

    A wrong password, a role that does not exist or may not log in, a database that does not
    exist, no CONNECT privilege, no pg_hba.conf entry; or a file or folder this process may not
    read or write (an SQLite journal, a change log, a lock file), or a folder where SQLite keeps
    a file beside a database (its `-wal`, `-shm` or `-journal`). Also a location that can hold
    no journal as it is, which neither `ordo init` nor a writer could make one: a folder where
    the SQLite file should be, a file where a folder of its path should be, a file that is no
    SQLite database, `:memory:`, a metadata table whose schema version is no number, a
    search_path whose schema does not exist or may not be used; an SQLite journal removed or
    moved away, or replaced by a database without ordo's tables, after it was opened; a folder
    where a change log's or a lock file's file should be, a file where its folder should be. (A
    location that holds no journal yet, which `ordo init` or a writer's first open creates,
    stays StorageUnavailableError: MissingFolderError, no file, no ordo tables in the file or
    schema.)
    No retry mends it until someone changes the URL, the server's roles and grants or the
    files: code that rides out outages by retrying StorageUnavailableError (a tracking
    processor, a capture, `ordo query --live`) gives up at once on this subclass. A subclass,
    so that callers catching StorageUnavailableError still catch it.
    """


class TransactionConflictError(StorageUnavailableError):
    """The server ended a transaction in a conflict with a concurrent one; retrying may succeed.

    PostgreSQL breaks a deadlock by rolling one of the transactions back (SQLSTATE 40P01),
    refuses a serialization failure (40001) and gives up waiting for a lock another transaction
    holds after the session's lock_timeout (55P03): nothing of the transaction was written and
    the server is up, which "PostgreSQL is unavailable" told otherwise. A subclass of
    StorageUnavailableError, so that code retrying outages retries this too: the other
    transaction ends.
    """


class StatementCanceledError(StorageUnavailableError):
    """PostgreSQL canceled a statement: its statement_timeout ran out, or a cancel request.

    SQLSTATE 57014: the session's statement_timeout (the URL's or the role's options), or
    pg_cancel_backend. Nothing of its transaction was written and the server is up, which
    "PostgreSQL is unavailable" told otherwise: the message names the setting. A subclass of
    StorageUnavailableError, so that code retrying outages (a tracking processor, `ordo query
    --live`) retries this too: a statement waits longest behind a lock or under a load, which
    pass.
    """


class MissingFolderError(StorageUnavailableError):
    """An SQLite journal's folder does not exist, and only `ordo init` (init_storage) makes one.

    Opening an SQLite database (a journal, a `--sink`, in any mode) creates a missing file,
    but, as sqlite3 does, not its folder: a misspelt folder became a tree with a new, empty
    journal in it. `path` is the database file, `folder` the folder that is missing (its
    parent).
    """

    def __init__(self, path: Path) -> None:
        self.path, self.folder = path, path.parent
        msg = (
            f"no journal at {path}: no folder {path.parent} "
            "(`ordo init` or ordo.init_storage() creates both)"
        )
        super().__init__(msg)


class SchemaVersionError(StorageError):
    """The schema is newer than this ordo's, or older where it may only be read."""

    def __init__(self, *, found: int, supported: int) -> None:
        self.found, self.supported = found, supported
        if found > supported:
            msg = (
                f"journal schema version {found} is newer than this ordo supports ({supported}); "
                "upgrade ordo"
            )
        else:
            msg = (
                f"journal schema version {found} is older than this ordo's ({supported}); "
                "commands that only read do not upgrade it: run `ordo init`"
            )
        super().__init__(msg)


class StorageIntegrityError(StorageError):
    """A write violated a constraint of the stored data, or what is stored is damaged.

    Damaged: not what ordo wrote (an event's JSON changed by hand, a change log file that is not
    Parquet). No retry mends either.
    """


class StoresClosedError(OrdoError):
    """Stores (their datastore's connections) were used after close(); nothing was done.

    A programming error, not an outage: no retry mends it, so it is no StorageError, which
    the processors and the tag writers retry.
    """


class ForkedProcessError(StoresClosedError):
    """A Journal, stores or a change source were used in a process that did not open them.

    A child made by os.fork (multiprocessing's default on Linux) inherits copies of them, whose
    connections are the parent's, and whose threads (the tag writers' flusher, the writer
    lease's heartbeat) do not run in the child. Nothing was done: open a Journal, stores, a
    query or a change source in each process. The stores are closed to the child, so what
    catches StoresClosedError (a tracking processor, which stops on it) catches this too.
    `opened_in` and `used_in` are process ids.
    """

    def __init__(self, *, what: str, opened_in: int, used_in: int) -> None:
        self.opened_in, self.used_in = opened_in, used_in
        msg = (
            f"{what} was opened in process {opened_in} and cannot be used in process "
            f"{used_in} (a forked child): open a new one in each process"
        )
        super().__init__(msg)
