"""The writer leases of the journal store (see ordo.journal.lease), in plain SQL."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, ClassVar

from ordo.storage.chunks import chunks
from ordo.types import PersistenceId

if TYPE_CHECKING:  # sql_store imports this module
    from ordo.storage.sql_store import SqlDatastore

LEASE_CHUNK = 500
"""Persistence ids per INSERT of a lease renewal (within every driver's parameter limit)."""


class SqlWriterLeases:
    """Mixin of SqlJournalStore: renew and release a writer's lease. Thread-safe.

    One transaction per call: the heartbeat upsert, then the persistence ids started since the
    last renewal, LEASE_CHUNK per multi-row INSERT.
    """

    PARAM: ClassVar[str]
    _db: SqlDatastore

    def renew_writer_lease(
        self,
        writer_uuid: str,
        persistence_ids: Collection[PersistenceId],
        *,
        started_at_ms: int,
        now_ms: int,
    ) -> None:
        """Upsert the lease's heartbeat and add the persistence ids, in one transaction."""
        pids = sorted(persistence_ids)
        with self._db.write_transaction() as conn:
            conn.execute(
                self._lease_sql(
                    "INSERT INTO writer_leases (writer_uuid, started_at, heartbeat_at) "
                    "VALUES ({p}, {p}, {p}) ON CONFLICT (writer_uuid) DO UPDATE "
                    "SET heartbeat_at = excluded.heartbeat_at"
                ),
                (writer_uuid, started_at_ms, now_ms),
            )
            for chunk in chunks(pids, LEASE_CHUNK):
                values = ", ".join(["({p}, {p})"] * len(chunk))
                conn.execute(
                    self._lease_sql(
                        f"INSERT INTO writer_lease_pids (writer_uuid, persistence_id) "
                        f"VALUES {values} ON CONFLICT DO NOTHING"
                    ),
                    [value for pid in chunk for value in (writer_uuid, pid)],
                )

    def release_writer_lease(self, writer_uuid: str) -> None:
        """Delete the lease and its persistence ids."""
        with self._db.write_transaction() as conn:
            conn.execute(
                self._lease_sql("DELETE FROM writer_lease_pids WHERE writer_uuid = {p}"),
                (writer_uuid,),
            )
            conn.execute(
                self._lease_sql("DELETE FROM writer_leases WHERE writer_uuid = {p}"), (writer_uuid,)
            )

    def _lease_sql(self, template: str) -> str:
        return template.format(p=self.PARAM)
