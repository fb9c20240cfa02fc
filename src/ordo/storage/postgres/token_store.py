"""The token store of tracking processors, and the all-events reader, on PostgreSQL."""

from __future__ import annotations

from ordo.processing.connection import SqlConnection
from ordo.storage.sql_tag_view_store import SqlAllEventsReader
from ordo.storage.sql_token_store import SqlTokenStore


class PostgresTokenStore(SqlTokenStore):
    """TokenStore on PostgreSQL: rows a write checks before changing them are locked FOR UPDATE.

    Split, merge, reset and advance_unclaimed lock them (in segment id order where they take
    several), so a claim committed meanwhile is seen rather than overwritten. The reset then
    locks positions in persistence id order, as batches do (SqlTokenReset.reset has the order).
    """

    PARAM = "%s"
    LOCK_ROWS = " FOR UPDATE"

    def _limit_idle(self, conn: SqlConnection, idle_limit_ms: int) -> None:
        """idle_in_transaction_session_timeout for this transaction only (set_config local)."""
        conn.execute(
            "SELECT set_config('idle_in_transaction_session_timeout', %s, true)",
            (str(idle_limit_ms),),
        )


class PostgresAllEventsReader(SqlAllEventsReader):
    """Every journal event as a TagViewReader on Postgres."""

    PARAM = "%s"
