"""The token store of tracking processors, and the all-events reader, on SQLite."""

from __future__ import annotations

from ordo.storage.sql_tag_view_store import SqlAllEventsReader
from ordo.storage.sql_token_store import SqlTokenStore


class SQLiteTokenStore(SqlTokenStore):
    """TokenStore on SQLite: BEGIN IMMEDIATE already serializes writers, so rows need no lock."""

    PARAM = "?"


class SQLiteAllEventsReader(SqlAllEventsReader):
    """Every journal event as a TagViewReader on SQLite."""

    PARAM = "?"
