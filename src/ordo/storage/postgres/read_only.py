"""Why PostgreSQL refused a write as read-only: a standby (an outage) or a read-only default.

Two servers refuse a write with SQLSTATE 25006 (read_only_sql_transaction), and they ask
different things of ordo. A hot standby does during a failover, until it is promoted or the URL
reaches the new primary: an outage, which a retry mends. A primary does where a DBA made
read-only the default of the role or the database (`ALTER ROLE ... SET
default_transaction_read_only = on`), or the URL's options ask for it: no retry mends that.
Taken for an outage too, it had a tracking processor and the journal's tag writer retry for
ever, and `ordo init` call the server "unavailable". A default of the whole server's
configuration stays an outage: that is what hosted services switch on for a while (a disk
nearly full) and off again, which a retry rides out.
"""

from __future__ import annotations

import psycopg

from ordo.errors import StorageAccessError
from ordo.storage.postgres.connection import Connection, redacted_dsn

_SETTING = "default_transaction_read_only"
_READ_ONLY_DEFAULT = "SELECT pg_is_in_recovery(), setting, source FROM pg_settings WHERE name = %s"
_SET_BY = {
    "user": "for the role (ALTER ROLE ... SET)",
    "database": "for the database (ALTER DATABASE ... SET)",
    "database user": "for the role in this database (ALTER ROLE ... IN DATABASE ... SET)",
    "client": "by the URL's options",
}
"""The sources (pg_settings.source) of a deliberate read-only default, as a message names
them; a default from anywhere else (the server's configuration) is taken for an outage."""


def read_only_refusal(
    conn: Connection, dsn: str, exc: psycopg.errors.ReadOnlySqlTransaction
) -> StorageAccessError | None:
    """StorageAccessError for `exc`, a write a primary refused as read-only; None otherwise.

    The server is asked on `conn`, the session that refused, once the refused transaction is
    rolled back: `pg_is_in_recovery()` tells a standby, and the session's
    default_transaction_read_only (with where it was set) a read-only default. Only a primary
    whose session default is on, set for the role, the database or by the URL, is a refusal; a
    standby, a server promoted since the write (its default off), a default of the server's
    configuration (see the module), and a question that fails (the session is lost) leave the
    driver's error as it was, an outage to `translate_postgres_error`.
    """
    set_by = _read_only_default(conn)
    if set_by is None:
        return None
    msg = (
        f"PostgreSQL at {redacted_dsn(dsn)} is no standby but runs ordo's transactions "
        f"read-only: {_SETTING} is on, set {set_by}; ordo writes nothing there until it "
        f"is off: {exc}"
    )
    return StorageAccessError(msg)


def _read_only_default(conn: Connection) -> str | None:
    """Where the read-only default of a primary's session was set; None for anything else."""
    try:
        row = conn.execute(_READ_ONLY_DEFAULT, (_SETTING,)).fetchone()
    except psycopg.Error:
        return None
    if row is None or row[0] or row[1] != "on":
        return None
    return _SET_BY.get(str(row[2]))
