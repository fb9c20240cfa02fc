"""Every exception ordo raises.

OrdoError
├── ConfigurationError (ValueError)
│   ├── BucketSizeMismatchError
│   ├── ClassArchiveError
│   ├── CheckpointMismatchError
│   ├── MaterializerCheckpointError
│   ├── NoSparkExecutorError
│   ├── PartitionCountMismatchError
│   ├── SparkMasterUnreachableError
│   └── UnknownUrlSchemeError
├── InvalidInputError (ValueError)
│   ├── InvalidIdentifierError
│   ├── InvalidSequenceNrError
│   ├── SerializationError
│   ├── OffsetFormatError
│   ├── FutureOffsetError
│   └── InvalidSegmentOperationError
├── StorageError
│   ├── StorageUnavailableError (ConnectionError)
│   │   ├── StorageAccessError
│   │   ├── MissingFolderError
│   │   ├── TransactionConflictError
│   │   ├── StatementCanceledError
│   │   └── TagWriteBacklogError
│   ├── SchemaVersionError
│   ├── StorageIntegrityError
│   │   └── ConcurrencyConflictError
│   ├── TagWriteFailedError
│   └── WriterLeaseLostError
├── MissingTaggedEventError
├── ProjectionGapError
├── TokenStoreError
│   ├── UnknownProcessorError (LookupError)
│   │   └── UnknownSegmentError
│   ├── UnableToClaimTokenError
│   ├── PendingHandOverError
│   ├── PendingMergeError
│   └── PendingRequestError
├── PartialResetError
├── ElementFailedError
│   └── ElementTimeoutError (TimeoutError)
├── EventHandlingError
├── QueryFailedError
├── AlreadyRunningError
├── AppendStoppedError
├── JournalClosedError
├── StoresClosedError
│   └── ForkedProcessError
├── CdcError
│   ├── MalformedMutationError (ValueError)
│   ├── InvalidSchemaError (ValueError)
│   │   ├── NoPrimaryKeyError
│   │   ├── UnmappableColumnTypeError
│   │   └── JsonKeyColumnError
│   ├── IncompatibleSchemaError
│   ├── UnknownSchemaError (LookupError)
│   ├── MaterializedRetypeError
│   ├── MaterializedKeyChangeError
│   ├── MaterializedTableMissingError
│   ├── OldKeyMessageError
│   ├── UnconvertibleValueError
│   └── CaptureError
│       ├── ReplicationSlotMissingError
│       └── SourceRewoundError
└── OperationRefusedError
    ├── ActiveWriterError
    └── TimeToLiveTooShortError

Import them from here. The modules of this package hold them by concept (configuration, invalid
input, storage, journal, query, processing, cdc, operations), and each class names `ordo.errors`
as its module, as it did when they were one module: tracebacks print `ordo.errors.StorageError`
and pickles (an error a Spark worker raises) refer to it there.
"""

from __future__ import annotations

from ordo.errors.cdc import (
    CaptureError,
    CdcError,
    IncompatibleSchemaError,
    InvalidSchemaError,
    JsonKeyColumnError,
    MalformedMutationError,
    MaterializedKeyChangeError,
    MaterializedRetypeError,
    MaterializedTableMissingError,
    NoPrimaryKeyError,
    OldKeyMessageError,
    ReplicationSlotMissingError,
    SourceRewoundError,
    UnconvertibleValueError,
    UnknownSchemaError,
    UnmappableColumnTypeError,
)
from ordo.errors.configuration import (
    BucketSizeMismatchError,
    CheckpointMismatchError,
    ClassArchiveError,
    ConfigurationError,
    MaterializerCheckpointError,
    NoSparkExecutorError,
    PartitionCountMismatchError,
    SparkMasterUnreachableError,
    UnknownUrlSchemeError,
)
from ordo.errors.invalid_input import (
    FutureOffsetError,
    InvalidIdentifierError,
    InvalidInputError,
    InvalidSegmentOperationError,
    InvalidSequenceNrError,
    OffsetFormatError,
    SerializationError,
)
from ordo.errors.journal import (
    AppendStoppedError,
    ConcurrencyConflictError,
    JournalClosedError,
    TagWriteBacklogError,
    TagWriteFailedError,
    WriterLeaseLostError,
)
from ordo.errors.operations import ActiveWriterError, OperationRefusedError, TimeToLiveTooShortError
from ordo.errors.processing import (
    ElementFailedError,
    ElementTimeoutError,
    EventHandlingError,
    PartialResetError,
    PendingHandOverError,
    PendingMergeError,
    PendingRequestError,
    ProjectionGapError,
    TokenStoreError,
    UnableToClaimTokenError,
    UnknownProcessorError,
    UnknownSegmentError,
)
from ordo.errors.query import AlreadyRunningError, MissingTaggedEventError, QueryFailedError
from ordo.errors.root import OrdoError
from ordo.errors.storage import (
    ForkedProcessError,
    MissingFolderError,
    SchemaVersionError,
    StatementCanceledError,
    StorageAccessError,
    StorageError,
    StorageIntegrityError,
    StorageUnavailableError,
    StoresClosedError,
    TransactionConflictError,
)

__all__ = [
    "ActiveWriterError",
    "AlreadyRunningError",
    "AppendStoppedError",
    "BucketSizeMismatchError",
    "CaptureError",
    "CdcError",
    "CheckpointMismatchError",
    "ClassArchiveError",
    "ConcurrencyConflictError",
    "ConfigurationError",
    "ElementFailedError",
    "ElementTimeoutError",
    "EventHandlingError",
    "ForkedProcessError",
    "FutureOffsetError",
    "IncompatibleSchemaError",
    "InvalidIdentifierError",
    "InvalidInputError",
    "InvalidSchemaError",
    "InvalidSegmentOperationError",
    "InvalidSequenceNrError",
    "JournalClosedError",
    "JsonKeyColumnError",
    "MalformedMutationError",
    "MaterializedKeyChangeError",
    "MaterializedRetypeError",
    "MaterializedTableMissingError",
    "MaterializerCheckpointError",
    "MissingFolderError",
    "MissingTaggedEventError",
    "NoPrimaryKeyError",
    "NoSparkExecutorError",
    "OffsetFormatError",
    "OldKeyMessageError",
    "OperationRefusedError",
    "OrdoError",
    "PartialResetError",
    "PartitionCountMismatchError",
    "PendingHandOverError",
    "PendingMergeError",
    "PendingRequestError",
    "ProjectionGapError",
    "QueryFailedError",
    "ReplicationSlotMissingError",
    "SchemaVersionError",
    "SerializationError",
    "SourceRewoundError",
    "SparkMasterUnreachableError",
    "StatementCanceledError",
    "StorageAccessError",
    "StorageError",
    "StorageIntegrityError",
    "StorageUnavailableError",
    "StoresClosedError",
    "TagWriteBacklogError",
    "TagWriteFailedError",
    "TimeToLiveTooShortError",
    "TokenStoreError",
    "TransactionConflictError",
    "UnableToClaimTokenError",
    "UnconvertibleValueError",
    "UnknownProcessorError",
    "UnknownSchemaError",
    "UnknownSegmentError",
    "UnknownUrlSchemeError",
    "UnmappableColumnTypeError",
    "WriterLeaseLostError",
]

for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
