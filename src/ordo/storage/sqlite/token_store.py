"""The token store of tracking processors on SQLite."""

from __future__ import annotations

from ordo.storage.sql_token_store import SqlTokenStore


class SQLiteTokenStore(SqlTokenStore):
    """TokenStore on SQLite: BEGIN IMMEDIATE already serializes writers, so rows need no lock."""

    PARAM = "?"
