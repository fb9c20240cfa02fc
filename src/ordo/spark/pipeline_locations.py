"""Where a pipeline file's projection writes: its sink and its checkpoint, checked before Spark.

Spark finds out about a sink or a local checkpoint location it cannot use only once the query
starts, after seconds of start-up (and leaves a checkpoint behind): `PipelineConfig.from_toml`
checks both first. Errors name the pipeline file and the key.
"""

from __future__ import annotations

import os
from pathlib import Path

from ordo.errors import (
    ConfigurationError,
    StorageAccessError,
    StorageError,
    StorageUnavailableError,
)
from ordo.spark.checkpoint import local_checkpoint_path
from ordo.storage.location import (
    SQLiteLocation,
    file_as_folder,
    nearest_existing,
    parse_location,
    refuse_in_memory,
)
from ordo.storage.open import stores_at


def check_sink(path: Path, sink: str, journal: str) -> None:
    """Refuse a sink ordo cannot open: an unknown scheme, an SQLite file in no folder, ...

    The sink may be a new SQLite file (the projection creates it), so a misspelt folder (or
    `:memory:`, no file) would only show once Spark had started, and a misspelt file name
    cannot be told from a new one.
    An existing sink (a PostgreSQL database, an SQLite path that exists) must be one ordo can
    read: a folder, a file that is not SQLite or an unreachable server failed the query once
    Spark had started, leaving a checkpoint. It is only read here (its schema version), as
    commands that read a journal do; the journal, the default sink, was checked already. An
    older schema is fine (the projection upgrades it), a newer one is refused.
    """
    try:
        location = parse_location(sink, what="sink")
    except ConfigurationError as exc:
        msg = f"{path}: [pipeline] sink: {exc}"
        raise ConfigurationError(msg) from exc
    if isinstance(location, SQLiteLocation):
        try:
            refuse_in_memory(location.path, what="sink")
        except StorageAccessError as exc:
            msg = f"{path}: [pipeline] sink: {exc}"
            raise StorageAccessError(msg) from exc
        if not location.path.parent.is_dir():
            file = file_as_folder(location.path)  # "no folder f" sent the user to make one
            problem = (
                f"there is no folder {location.path.parent}"
                if file is None
                else f"{file} is a file, not a folder"
            )
            msg = f"{path}: [pipeline] sink {sink!r}: {problem}"
            raise ConfigurationError(msg)
        if not location.path.exists():
            return
    if sink == journal:
        return
    try:
        with stores_at(sink, mode="read") as stores:
            stores.check_schema(upgradable=True)
    except StorageError as exc:
        msg = f"{path}: [pipeline] sink: {exc}"  # no URL: it may hold a password
        # A refusal stays one: as an outage, code that retries outages retried it.
        refused = isinstance(exc, StorageAccessError)
        raise (StorageAccessError if refused else StorageUnavailableError)(msg) from exc


def check_checkpoint(path: Path, checkpoint: str) -> None:
    """Refuse a local checkpoint location that Spark could not create or write in.

    Spark finds out only when the query starts, after seconds of start-up, and says so in a
    Java stack trace. A local location (a path, or a file: URI) is checked here: the nearest
    part of it that exists must be a folder this process can write in. Nothing is created.
    Other URIs (hdfs://, s3a://, ...) are Spark's to check; a path without a scheme is taken
    as local, as Spark takes it with its default file system.
    """
    problem = None
    try:
        local = local_checkpoint_path(checkpoint)
    except ValueError as exc:
        local, problem = None, str(exc)
    if local is not None:
        existing = nearest_existing(local) or local
        if not existing.is_dir():
            problem = f"{existing} is not a folder"
        elif not os.access(existing, os.W_OK | os.X_OK):
            problem = f"cannot write in the folder {existing}"
    if problem is not None:
        msg = f"{path}: [pipeline] checkpoint {checkpoint!r}: {problem}"
        raise ConfigurationError(msg)
