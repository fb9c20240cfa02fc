"""What the connection loss tests share: long-lived PostgreSQL objects used again, without
reopening anything, after the server ended their sessions.

A restart, a failover or an administrator ends a server's sessions; here pg_terminate_backend
does, from another connection. Only a test's own sessions are ended: its URL names them by
application_name (a capture names the session that holds its lock after this process).
"""

from __future__ import annotations

import os
import secrets
import socket
from urllib.parse import urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql

# With a timeout the call returns once the sessions are gone, as after a restart or a failover.
_TERMINATE = (
    "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
    "WHERE application_name IN (%s, %s) AND pid <> pg_backend_pid()"
)
CAPTURE_APPLICATION_NAME = f"ordo cdc capture pid {os.getpid()} on {socket.gethostname()}"
"""The application_name of the session holding a capture's lock (the capture's own)."""


class Sessions:
    """A test's URL (its sessions named by application_name) and a way to end them."""

    def __init__(self, dsn: str) -> None:
        self.name = f"ordo-loss-{secrets.token_hex(4)}"
        parts = urlsplit(dsn)
        named = urlencode({"application_name": self.name})
        query = f"{parts.query}&{named}" if parts.query else named
        self.url = urlunsplit(parts._replace(query=query))
        self._dsn = dsn

    def terminate(self) -> int:
        """End every session of the test's URL and of this process's captures; how many."""
        with psycopg.connect(self._dsn, autocommit=True) as conn:
            row = conn.execute(_TERMINATE, (self.name, CAPTURE_APPLICATION_NAME)).fetchone()
        return 0 if row is None else int(row[0])

    def count(self, condition: str) -> int:
        """How many of the test's sessions pg_stat_activity shows with `condition` (SQL) true."""
        query = sql.SQL(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND ({})"
        ).format(sql.SQL(condition))
        with psycopg.connect(self._dsn, autocommit=True) as conn:
            row = conn.execute(query, (self.name,)).fetchone()
        return 0 if row is None else int(row[0])

    def execute(self, statement: str, params: tuple[object, ...] = ()) -> None:
        """Run `statement`, committed durably: a slot decodes it at once."""
        with psycopg.connect(self._dsn, autocommit=True) as conn:
            conn.execute("SET synchronous_commit = on")
            conn.execute(statement, params)
