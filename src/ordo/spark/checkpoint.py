"""A streaming query's checkpoint location: where it is locally, its query, one running query.

Spark's own check of a checkpoint shared by two running queries comes seconds after start-up,
when the second writes its metadata or offset log, and says so in Spark's terms
(`SparkConcurrentModificationException: Multiple streaming queries are concurrently using
metadata`, `CONCURRENT_STREAM_LOG_UPDATE`); a second query that starts while the first is in the
middle of a batch runs that batch again beside it until then. `checkpoint_lock` refuses the
second copy of a job before its Spark starts.

A checkpoint belongs to one streaming query: Spark writes the query's id to
`<checkpoint>/metadata` when the query first starts and keeps it across restarts;
`checkpoint_query_id` reads it before Spark starts, `next_batch` the batch it runs next, and
`last_planned_offset` where the query's source stands.
"""

from __future__ import annotations

import json
import os
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from urllib.parse import urlsplit

from ordo.errors import ConfigurationError
from ordo.storage.lock_file import LOCK_FILE, exclusive_lock


def checkpoint_lock(checkpoint: str, job: str) -> AbstractContextManager[None]:
    """Hold `<checkpoint>/.ordo.lock` for the block when the checkpoint is local.

    AlreadyRunningError (`<job> is already running on checkpoint ... (pid N on HOST)`) while
    another process holds it. A checkpoint on another file system (hdfs://, s3a://) is left to
    Spark's check. The checkpoint's folder is made here, as Spark would make it.
    """
    local = local_checkpoint_path(checkpoint)
    if local is None:
        return nullcontext()
    return exclusive_lock(local / LOCK_FILE, f"{job} is already running on checkpoint {checkpoint}")


def local_checkpoint_path(checkpoint: str) -> Path | None:
    """The local folder Spark makes of `checkpoint`, absolute; None for another file system.

    As Hadoop's file system reads it: `..` is taken away by the name alone (`ck/../file/x` is
    in `file` even when `ck` does not exist), and a file: URI's path is used as written, not
    percent-decoded (`%20` and `#` are part of the folder's name). A file: URI with a host or
    a relative path, and a NUL character, are ConfigurationErrors (ValueErrors too): Spark
    refused them once started. So is a checkpoint that is no text, or an empty one (Spark's
    IllegalArgumentException; None was a TypeError here).
    """
    if not isinstance(checkpoint, str) or not checkpoint.strip():
        msg = f"checkpoint must be a non-empty path or URI, got {checkpoint!r:.80}"
        raise ConfigurationError(msg)
    if "\0" in checkpoint:
        msg = "a path cannot hold a NUL character"
        raise ConfigurationError(msg)
    try:
        scheme = urlsplit(checkpoint).scheme.lower()
    except ValueError as exc:  # an unclosed [ of a host
        msg = f"malformed checkpoint URI {checkpoint!r}: {exc}"
        raise ConfigurationError(msg) from exc
    if scheme not in ("", "file"):
        return None
    local = checkpoint
    if scheme:
        local = checkpoint[len("file:") :]
        if local.startswith("//"):
            host, _, rest = local[2:].partition("/")
            if host:
                msg = f"a file: URI takes no host ({host!r}), as in file:///path"
                raise ConfigurationError(msg)
            local = f"/{rest}"
        if not local.startswith("/"):
            msg = "a file: URI needs an absolute path, as in file:///path"
            raise ConfigurationError(msg)
    return Path(os.path.abspath(local))


def checkpoint_query_id(local: Path) -> str | None:
    """The id of the streaming query of the local checkpoint `local`; None if no query ran yet.

    ConfigurationError when `<local>/metadata` is there and holds no id: Spark refuses to start
    a query from such a checkpoint too.
    """
    metadata = local / "metadata"
    try:
        found = json.loads(metadata.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        msg = f"cannot read the query id of checkpoint {local} from {metadata}: {exc}"
        raise ConfigurationError(msg) from exc
    query_id = found.get("id") if isinstance(found, dict) else None
    if not isinstance(query_id, str):
        msg = f"{metadata} holds no query id: it is not a streaming query's checkpoint metadata"
        raise ConfigurationError(msg)
    return query_id


def next_batch(local: Path) -> int:
    """The first batch the query of the local checkpoint `local` runs: one after its last commit.

    Spark writes `<local>/commits/<batch id>` once a batch's sink returned, and numbers a new
    query's batches from 0; a batch planned and not committed (`offsets/` only) runs again.
    """
    return max(_batch_ids(local, "commits"), default=-1) + 1


def last_planned_offset(local: Path) -> dict[str, object] | None:
    """The source offset the newest planned batch of the local checkpoint `local` ends at.

    None before the query planned a batch. Spark writes `<local>/offsets/<batch id>` before it
    runs the batch: a version line, the batch's metadata, then each source's offset as JSON, one
    per line (the last is that of a query with one source). ConfigurationError when the file
    cannot be read as such: Spark refuses to start a query from it too.
    """
    batches = _batch_ids(local, "offsets")
    if not batches:
        return None
    newest = local / "offsets" / str(max(batches))
    try:
        found = json.loads(newest.read_text(encoding="utf-8").splitlines()[-1])
    except (OSError, ValueError, IndexError) as exc:
        msg = f"cannot read the source offset of checkpoint {local} from {newest}: {exc}"
        raise ConfigurationError(msg) from exc
    if not isinstance(found, dict):
        msg = f"{newest} ends with no source offset: it is not a streaming query's offset log"
        raise ConfigurationError(msg)
    return found


def _batch_ids(local: Path, log: str) -> list[int]:
    """The batch ids of the files in the log `log` (commits, offsets) of the checkpoint `local`.

    Empty when the log is not there (a query that never got so far). A log this process may not
    list (a checkpoint another user's Spark wrote) is ConfigurationError naming it: it was the
    bare PermissionError of the check before Spark starts, and Spark cannot list it either.
    Only names of ASCII digits are batches, as Spark writes them: str.isdigit() alone took a
    file named `²` too, which int() refuses, so the check ended in a ValueError traceback.
    """
    folder = local / log
    try:
        return [
            int(entry.name)
            for entry in folder.iterdir()
            if entry.name.isascii() and entry.name.isdigit()
        ]
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        msg = f"cannot list the {log} of checkpoint {local}: {exc.strerror}: {exc.filename}"
        raise ConfigurationError(msg) from exc
