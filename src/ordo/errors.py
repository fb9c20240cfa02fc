"""Every exception ordo raises.

OrdoError
├── ConfigurationError (ValueError)
│   ├── BucketSizeMismatchError
│   └── UnknownUrlSchemeError
├── InvalidInputError (ValueError)
│   ├── InvalidIdentifierError
│   ├── InvalidSequenceNrError
│   ├── SerializationError
│   └── OffsetFormatError
├── StorageError
│   ├── StorageUnavailableError (ConnectionError)
│   ├── SchemaVersionError
│   └── StorageIntegrityError
│       └── ConcurrencyConflictError
└── JournalClosedError
"""

from __future__ import annotations


class OrdoError(Exception):
    """Root of every error ordo raises: catch this to catch them all."""


class ConfigurationError(OrdoError, ValueError):
    """A setting, option or URL is invalid; the message names the key."""


class BucketSizeMismatchError(ConfigurationError):
    """The journal was written with another bucket size, which can never change afterwards."""

    def __init__(self, *, recorded: str, requested: str) -> None:
        self.recorded, self.requested = recorded, requested
        msg = (
            f"journal was written with bucket_size={recorded}, cannot open it with "
            f"bucket_size={requested} (the bucket size cannot change after data is written)"
        )
        super().__init__(msg)


class UnknownUrlSchemeError(ConfigurationError):
    """A journal URL names a backend ordo does not have."""


class InvalidInputError(OrdoError, ValueError):
    """A caller passed a value ordo rejects; nothing was changed."""


class InvalidIdentifierError(InvalidInputError):
    """A persistence id or tag is empty, too long or contains a NUL character."""


class InvalidSequenceNrError(InvalidInputError):
    """A sequence number is out of range (they start at 1; expected ones at 0)."""


class SerializationError(InvalidInputError):
    """A payload or metadata value cannot be serialized (not bytes and not JSON)."""


class OffsetFormatError(InvalidInputError):
    """A value is not a valid TimeUUID or offset."""


class StorageError(OrdoError):
    """The storage backend failed; the driver's error is chained as the cause."""


class StorageUnavailableError(StorageError, ConnectionError):
    """The database cannot be reached or opened."""


class SchemaVersionError(StorageError):
    """The database was created by a newer ordo (or is not an ordo journal)."""

    def __init__(self, *, found: int, supported: int) -> None:
        self.found, self.supported = found, supported
        msg = (
            f"journal schema version {found} is newer than this ordo supports ({supported}); "
            "upgrade ordo"
        )
        super().__init__(msg)


class StorageIntegrityError(StorageError):
    """A write violated a constraint of the stored data."""


class ConcurrencyConflictError(StorageIntegrityError):
    """Optimistic concurrency failed: another writer appended to the persistence id first."""

    def __init__(self, *, persistence_id: str, expected: int, actual: int) -> None:
        self.persistence_id, self.expected, self.actual = persistence_id, expected, actual
        msg = (
            f"persistence_id={persistence_id!r}: expected sequence_nr {expected} "
            f"but the journal is at {actual}"
        )
        super().__init__(msg)


class JournalClosedError(OrdoError):
    """The journal (or its tag writer) was used after close()."""
