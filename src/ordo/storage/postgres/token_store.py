"""The token store of tracking processors, and the all-events reader, on PostgreSQL."""

from __future__ import annotations

from ordo.storage.sql_store import SqlAllEventsReader
from ordo.storage.sql_token_store import SqlTokenStore


class PostgresTokenStore(SqlTokenStore):
    """TokenStore on PostgreSQL: rows read to split or merge are locked FOR UPDATE."""

    PARAM = "%s"
    LOCK_ROWS = " FOR UPDATE"


class PostgresAllEventsReader(SqlAllEventsReader):
    """Every journal event as a TagViewReader on Postgres."""

    PARAM = "%s"
