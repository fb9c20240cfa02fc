"""The operations tools' store (reconciliation, cleanup, expiry, Spark reads), written once.

Backends subclass SqlOperationsStore and add `_upsert_rows`, the one statement that differs
(json_each on SQLite, unnest on PostgreSQL). Deletes of a persistence id's rows select them by
(tag, persistence_id): tag_views is keyed by (tag, time bucket, ...), so each is a scan of the
tag's rows. That is the price of keeping the tag writer's path free of a second index.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from ordo.hashing import stable_hash
from ordo.processing.connection import SqlConnection
from ordo.storage.chunks import chunks
from ordo.storage.migration import EXPIRED_BEFORE_KEY, METADATA_TABLE
from ordo.storage.rows import PROGRESS_COLUMNS, latest_progress, progress_from_row
from ordo.storage.sql_operations_reads import DELETED_TO, SqlOperationsReads, sequence_nr_of
from ordo.tagging import TagProgress
from ordo.tools.ports import DeletedCounts, TagViewRow
from ordo.types import PersistenceId, SequenceNr, Tag, TimeBucket

_TAG_VIEW_KEY = "tag, timebucket, timeuuid, persistence_id, tag_pid_sequence_nr"
UPSERT_INTO = (
    "INSERT INTO tag_views (tag, timebucket, timeuuid, persistence_id, tag_pid_sequence_nr, "
    "sequence_nr, persistence_id_hash, writer_uuid, serializer, manifest, payload, metadata, tags) "
)
"""The columns a backend's `_upsert_rows` fills: its SELECT joins the row keys to `messages`."""
_RAISE_PROGRESS = (
    " ON CONFLICT (persistence_id, tag) DO UPDATE SET sequence_nr = excluded.sequence_nr, "
    "tag_pid_sequence_nr = excluded.tag_pid_sequence_nr, timeuuid = excluded.timeuuid "
    "WHERE excluded.tag_pid_sequence_nr > tag_write_progress.tag_pid_sequence_nr"
)
"""Move a progress row forward only, as the tag writer does."""
_PROGRESS_CHUNK = 500
"""Progress rows per INSERT (within every driver's parameter limit)."""
_NAMES_NO_DELETED_EVENT = (
    "NOT EXISTS (SELECT 1 FROM all_persistence_ids AS a "
    "WHERE a.persistence_id = tag_write_progress.persistence_id "
    "AND tag_write_progress.sequence_nr <= a.deleted_to)"
)
"""A tag_write_progress row that a truncate deletes: one naming an event deleted from the
journal is the only record of its tag's numbering, which no rebuild can derive again."""


class SqlOperationsStore(SqlOperationsReads):
    """OperationsStore in plain SQL; subclasses add `_upsert_rows`. Thread-safe.

    What the operations read (status, writer leases, dry-run counts) is SqlOperationsReads'.
    """

    UPSERT_CONFLICT: ClassVar[str] = (
        f"ON CONFLICT ({_TAG_VIEW_KEY}) DO UPDATE SET sequence_nr = excluded.sequence_nr, "
        "persistence_id_hash = excluded.persistence_id_hash, "
        "writer_uuid = excluded.writer_uuid, serializer = excluded.serializer, "
        "manifest = excluded.manifest, payload = excluded.payload, "
        "metadata = excluded.metadata, tags = excluded.tags"
    )
    """How a rebuilt row overwrites a stored row with its key: the journal's columns win."""

    # --- writes --------------------------------------------------------------------------

    def replace_tag_view(
        self,
        persistence_id: PersistenceId,
        tag: Tag,
        rows: Sequence[TagViewRow],
        progress: TagProgress | None,
        *,
        keep_up_to: SequenceNr,
    ) -> int:
        """Delete the (tag, id) rows after keep_up_to, upsert `rows`, set the progress.

        To `progress`; without one (no event left in the journal has the tag), to the newest
        kept row's, or the stored progress if that is newer and up to `keep_up_to`.
        """
        with self._db.write_transaction() as conn:
            deleted = conn.execute(
                self._sql(
                    "DELETE FROM tag_views WHERE tag = {p} AND persistence_id = {p} "
                    "AND sequence_nr > {p}"
                ),
                (tag, persistence_id, keep_up_to),
            ).rowcount
            if rows:
                self._upsert_rows(conn, rows)
            if progress is not None:
                self._replace_progress(conn, progress)
            else:
                self._keep_numbering(conn, persistence_id, tag, keep_up_to)
            return deleted

    def set_tag_scanning(self, persistence_id: PersistenceId, sequence_nr: SequenceNr) -> None:
        """Set the id's tag_scanning exactly (0 deletes the row)."""
        with self._db.write_transaction() as conn:
            conn.execute(
                self._sql("DELETE FROM tag_scanning WHERE persistence_id = {p}"),
                (persistence_id,),
            )
            if sequence_nr > 0:
                conn.execute(
                    self._sql(
                        "INSERT INTO tag_scanning (persistence_id, sequence_nr) VALUES ({p}, {p})"
                    ),
                    (persistence_id, sequence_nr),
                )

    def delete_tag_views(self, persistence_id: PersistenceId, tags: Sequence[Tag]) -> DeletedCounts:
        """Delete the id's rows and progress of the tags, and its tag_scanning row.

        Except the progress of the events deleted from the journal (`_keep_numbering`): the
        numbering recovery or a rebuild then goes on from, where no event left has the tag.
        """
        with self._db.write_transaction() as conn:
            deleted_to = sequence_nr_of(
                conn.execute(self._sql(DELETED_TO), (persistence_id,)).fetchone()
            )
            return self._delete_tag_views(
                conn, persistence_id, tags, keep_numbering_up_to=deleted_to
            )

    def delete_persistence_id(
        self, persistence_id: PersistenceId, tags: Sequence[Tag]
    ) -> DeletedCounts:
        """Delete the id's events, rows, progress, scanning and its registration."""
        with self._db.write_transaction() as conn:
            # Forgotten, the id numbers its events from 1 again, and its tags with them.
            counts = self._delete_tag_views(
                conn, persistence_id, tags, keep_numbering_up_to=SequenceNr(0)
            )
            events = conn.execute(
                self._sql("DELETE FROM messages WHERE persistence_id = {p}"), (persistence_id,)
            ).rowcount
            for table in ("all_persistence_ids", "writer_lease_pids"):
                conn.execute(
                    self._sql(f"DELETE FROM {table} WHERE persistence_id = {{p}}"),
                    (persistence_id,),
                )
            return counts + DeletedCounts(events=events)

    def truncate_tag_views(self, *, dry_run: bool) -> DeletedCounts:
        """Delete (or count) every row of tag_views, tag_write_progress and tag_scanning.

        Except the progress rows naming events deleted from the journal: see
        `_NAMES_NO_DELETED_EVENT`.
        """
        tables = (
            "tag_views",
            f"tag_write_progress WHERE {_NAMES_NO_DELETED_EVENT}",
            "tag_scanning",
        )
        with self._db.write_transaction() as conn:
            if dry_run:
                counts = [
                    int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
                    for table in tables
                ]
            else:
                counts = [conn.execute(f"DELETE FROM {table}").rowcount for table in tables]
        rows, progress, scanning = counts
        return DeletedCounts(tag_view_rows=rows, progress_rows=progress, scanning_rows=scanning)

    def delete_tag_views_before(
        self, tag: Tag, *, up_to_bucket: TimeBucket, before: bytes, limit: int
    ) -> int:
        """Delete at most `limit` rows of the tag with timeuuid < before (one transaction).

        The progress of each id moves up to its newest deleted row, in the same transaction:
        a writer killed between its rows and its progress (seed 000) left it behind them, and
        recovery wrote the expired events again.
        """
        with self._db.write_transaction() as conn:
            deleted = conn.execute(
                self._sql(
                    f"DELETE FROM tag_views WHERE ({_TAG_VIEW_KEY}) IN (SELECT {_TAG_VIEW_KEY} "
                    "FROM tag_views WHERE tag = {p} AND timebucket <= {p} AND timeuuid < {p} "
                    f"LIMIT {{p}}) RETURNING {PROGRESS_COLUMNS}"
                ),
                (tag, up_to_bucket, before, limit),
            ).fetchall()
            newest = latest_progress([progress_from_row(row) for row in deleted])
            for chunk in chunks(newest, _PROGRESS_CHUNK):
                values = ", ".join(["({p}, {p}, {p}, {p}, {p})"] * len(chunk))
                conn.execute(
                    self._sql(f"INSERT INTO tag_write_progress ({PROGRESS_COLUMNS}) ")
                    + self._sql(f"VALUES {values}{_RAISE_PROGRESS}"),
                    [value for progress in chunk for value in _progress_values(progress)],
                )
            return len(deleted)

    def record_expiry(self, cutoff_ms: int, tag: Tag | None) -> None:
        """Move the tag's horizon (every tag's when None) up to `cutoff_ms` in one upsert.

        Compared as numbers in the statement, so two deletions at once keep the later cutoff.
        """
        key = EXPIRED_BEFORE_KEY if tag is None else f"{EXPIRED_BEFORE_KEY}:{tag}"
        with self._db.write_transaction() as conn:
            conn.execute(
                self._sql(
                    f"INSERT INTO {METADATA_TABLE} (key, value) VALUES ({{p}}, {{p}}) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value WHERE "
                    f"CAST(excluded.value AS BIGINT) > CAST({METADATA_TABLE}.value AS BIGINT)"
                ),
                (key, str(cutoff_ms)),
            )

    def upsert_tag_view_rows(self, rows: Sequence[TagViewRow]) -> None:
        """Insert or overwrite the rows in one transaction."""
        if rows:
            with self._db.write_transaction() as conn:
                self._upsert_rows(conn, rows)

    def write_exact_progress(self, progress: Sequence[TagProgress]) -> None:
        """Set the progress rows to exactly these values."""
        if not progress:
            return
        with self._db.write_transaction() as conn:
            for p in progress:
                self._replace_progress(conn, p)

    def write_tag_scanning(self, scanned: Mapping[PersistenceId, SequenceNr]) -> None:
        """Move each id's tag_scanning to at least its value."""
        if not scanned:
            return
        with self._db.write_transaction() as conn:
            for pid, sequence_nr in scanned.items():
                conn.execute(
                    self._sql(
                        "INSERT INTO tag_scanning (persistence_id, sequence_nr) VALUES ({p}, {p}) "
                        "ON CONFLICT (persistence_id) DO UPDATE "
                        "SET sequence_nr = excluded.sequence_nr "
                        "WHERE excluded.sequence_nr > tag_scanning.sequence_nr"
                    ),
                    (pid, sequence_nr),
                )

    # --- helpers -------------------------------------------------------------------------

    def _upsert_rows(self, conn: SqlConnection, rows: Sequence[TagViewRow]) -> None:
        raise NotImplementedError

    def _replace_progress(self, conn: SqlConnection, progress: TagProgress) -> None:
        conn.execute(
            self._sql("DELETE FROM tag_write_progress WHERE persistence_id = {p} AND tag = {p}"),
            (progress.persistence_id, progress.tag),
        )
        conn.execute(
            self._sql(
                f"INSERT INTO tag_write_progress ({PROGRESS_COLUMNS}) "
                "VALUES ({p}, {p}, {p}, {p}, {p})"
            ),
            _progress_values(progress),
        )

    def _keep_numbering(
        self,
        conn: SqlConnection,
        persistence_id: PersistenceId,
        tag: Tag,
        keep_up_to: SequenceNr,
    ) -> int:
        """Raise the (id, tag) progress to the newest row of the events deleted up to keep_up_to.

        The journal numbers the tag's next event from this progress: deleted, it started again
        at 1 beside the kept rows, and a query that had delivered them took the new event for
        one it had seen. A stored progress beyond keep_up_to is dropped (returns how many were):
        it names an event still in the journal, which recovery or a rebuild numbers from, or
        none (stale). With keep_up_to 0 no event was deleted: no row to raise it to, no scan.
        """
        dropped = conn.execute(
            self._sql(
                "DELETE FROM tag_write_progress WHERE persistence_id = {p} AND tag = {p} "
                "AND sequence_nr > {p}"
            ),
            (persistence_id, tag, keep_up_to),
        ).rowcount
        if keep_up_to == 0:
            return dropped
        conn.execute(
            self._sql(
                f"INSERT INTO tag_write_progress ({PROGRESS_COLUMNS}) "
                f"SELECT {PROGRESS_COLUMNS} FROM tag_views WHERE tag = {{p}} "
                "AND persistence_id = {p} AND sequence_nr <= {p} "
                "ORDER BY tag_pid_sequence_nr DESC LIMIT 1" + _RAISE_PROGRESS
            ),
            (tag, persistence_id, keep_up_to),
        )
        return dropped

    def _delete_tag_views(
        self,
        conn: SqlConnection,
        persistence_id: PersistenceId,
        tags: Sequence[Tag],
        *,
        keep_numbering_up_to: SequenceNr,
    ) -> DeletedCounts:
        """Delete the id's rows and progress of the tags (see `_keep_numbering`), its scanning."""
        rows = progress = 0
        for tag in tags:
            progress += self._keep_numbering(conn, persistence_id, tag, keep_numbering_up_to)
            rows += conn.execute(
                self._sql("DELETE FROM tag_views WHERE tag = {p} AND persistence_id = {p}"),
                (tag, persistence_id),
            ).rowcount
        scanning = conn.execute(
            self._sql("DELETE FROM tag_scanning WHERE persistence_id = {p}"), (persistence_id,)
        ).rowcount
        return DeletedCounts(tag_view_rows=rows, progress_rows=progress, scanning_rows=scanning)


def _progress_values(progress: TagProgress) -> tuple[object, ...]:
    """A progress row's values in PROGRESS_COLUMNS order."""
    return (
        progress.persistence_id,
        progress.tag,
        progress.sequence_nr,
        progress.tag_pid_sequence_nr,
        progress.timeuuid.to_bytes(),
    )


def persistence_id_hashes(rows: Sequence[TagViewRow]) -> list[int]:
    """The stable_hash of each row's persistence id (computed once per id), in row order."""
    hashes = {pid: stable_hash(pid) for pid in {r.persistence_id for r in rows}}
    return [hashes[r.persistence_id] for r in rows]
