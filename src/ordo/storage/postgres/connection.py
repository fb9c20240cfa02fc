"""Opening PostgreSQL sessions: the parameters ordo adds, and why a connect failed.

A connect fails for one of two reasons, which callers handle apart: an outage (the server is
down, starting, unreachable or silent: StorageUnavailableError, worth retrying) or a refusal
(the server is up and refuses this URL: StorageAccessError, which no retry mends).
"""

from __future__ import annotations

import os

import psycopg
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict, make_conninfo, timeout_from_conninfo

from ordo.errors import ConfigurationError, StorageAccessError, StorageUnavailableError

CONNECT_TIMEOUT_S = 10
SILENT_SERVER_DEFAULTS = {
    "connect_timeout": CONNECT_TIMEOUT_S,
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 4,
    "tcp_user_timeout": 30_000,
}
"""libpq parameters that bound waits on a server that went silent: a connect to 10 s, a
session to about 30 s.

`session_conninfo` leaves out those the URL names itself.
"""
DIAGNOSIS_CONNECT_TIMEOUT_S = 2
"""How long `explain_unconnectable` waits for its connect: libpq's shortest connect_timeout.

A server that needs longer is taken for unavailable, the side that a retry corrects.
"""

Connection = psycopg.Connection[tuple[object, ...]]
_LARGEST_PORT = 65_535

OUT_OF_SLOTS = ("too many clients", "too many connections", "connection slots are reserved")
"""Parts of the server's messages for SQLSTATE 53300 (PostgreSQL 15 and later, in English):
a server out of connection slots, for everyone, the role or the database."""


_READ_COMMITTED = "SELECT set_config('default_transaction_isolation', 'read committed', false)"


def read_committed(conn: Connection) -> None:
    """Make `conn`'s transactions read committed, whatever the role or database default.

    ordo's statements are written for PostgreSQL's default isolation: a write that waits for a
    row another session inserts or updates goes on with that row (an append racing another
    writer's registration of its persistence id, an upsert of a tag view or a token). Where a
    DBA made serializable the default (`ALTER DATABASE ... SET default_transaction_isolation`),
    such a write was rolled back as a serialization failure (TransactionConflictError on an
    append whose expected sequence nr was right), as were now and then appends to different
    persistence ids that only read the same index pages. A session setting (not local): it
    outlives each transaction. The stores' pool runs it on each new connection (`configure`).
    """
    conn.execute(_READ_COMMITTED)


def connect(dsn: str) -> Connection:
    """A plain autocommit session, or why there is none (StorageAccessError or -Unavailable).

    psycopg gives a failed connect no SQLSTATE (libpq keeps the server's only in the message
    text, which the server translates), so the reason is told by asking libpq whether the
    server is up (PQping, `psycopg.pq.PGconn.ping`): a server that is up and accepting
    connections refused this URL's role, password, database or CONNECT privilege, or its
    pg_hba.conf has no entry for it. A server that is starting or stopping (PQPING_REJECT) or
    that does not answer is an outage. Before it counts as a refusal the connect is attempted
    once more, so that a server that came up between the two is not taken for one that refuses.
    A timeout is an outage without asking: the ping would wait as long again. A server out of
    connection slots (53300: too many clients, or too many connections for the role or the
    database) answers the ping too, but is an outage: slots free up, and after a restart every
    client reconnects at once (a tracking processor stopped for good on it). It is told by the
    server's message text (OUT_OF_SLOTS), so only where the server writes English messages.
    """
    conninfo = session_conninfo(dsn)
    try:
        return psycopg.connect(conninfo, autocommit=True)
    except psycopg.errors.ConnectionTimeout as exc:
        raise _unavailable(dsn, exc) from exc
    except psycopg.Error as exc:
        if pq.PGconn.ping(conninfo.encode()) != pq.Ping.OK:
            raise _unavailable(dsn, exc) from exc
    try:
        return psycopg.connect(conninfo, autocommit=True)
    except psycopg.Error as exc:
        if any(text in str(exc) for text in OUT_OF_SLOTS):
            raise _unavailable(dsn, exc) from exc
        msg = f"PostgreSQL at {redacted_dsn(dsn)} refuses the connection: {exc}".strip()
        raise StorageAccessError(msg) from exc


def explain_unconnectable(dsn: str) -> None:
    """Raise why a connect to `dsn` fails (`connect`), within DIAGNOSIS_CONNECT_TIMEOUT_S.

    For a pool that could not lend a connection in time: its own attempts' errors stay inside
    it, so a refusal (a password changed, a role that may no longer log in) would look like an
    outage for ever. Returns when a connect works: the pool was only busy, or the server is
    back.
    """
    connect(make_conninfo(dsn, connect_timeout=DIAGNOSIS_CONNECT_TIMEOUT_S)).close()


def session_conninfo(dsn: str) -> str:
    """`dsn` with the connection parameters ordo adds: timeouts for a silent server.

    Each of SILENT_SERVER_DEFAULTS the URL does not name (connect_timeout included): psycopg's
    `make_conninfo` lets its keyword arguments override the URL's, so a default the URL names
    is left out and the URL's own value wins. A `dsn` libpq cannot parse (`host=db port`, an
    unknown URI parameter) is a ConfigurationError: it is no outage, and no retry mends it.

    Without them a statement in flight when the server went silent (a dropped route, a host
    that froze or lost power: no reset ever arrives) waited forever, and no reconnection path
    ran. With them the kernel ends such a session within about 30 s and the call fails with
    StorageUnavailableError: TCP keepalive probes (after 10 s of silence, every 5 s) find a
    silent peer while a call waits for an answer, and tcp_user_timeout (30 s) one that stopped
    acknowledging what was sent. A slow statement is not ended: the server's host answers the
    probes while it runs.
    """
    try:
        named = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:  # libpq cannot parse it: a traceback of every command
        msg = f"malformed PostgreSQL URL or conninfo: {exc}"
        raise ConfigurationError(msg) from exc
    if "port" in named:
        _require_ports(str(named["port"]), source="malformed PostgreSQL URL or conninfo")
    else:  # libpq takes the environment's (as it does the host's, user's, ...)
        _require_ports(os.environ.get("PGPORT", ""), source="PGPORT")
    defaults = {key: value for key, value in SILENT_SERVER_DEFAULTS.items() if key not in named}
    return make_conninfo(dsn, **defaults)


def _require_ports(ports: str, *, source: str) -> None:
    """ConfigurationError unless each of the comma-separated `ports` is a TCP port, or empty.

    libpq parses a port only when it connects, and its "invalid port number" was taken for an
    outage (StorageUnavailableError, retried by processors and live queries), though no retry
    mends a URL, nor a PGPORT variable, where libpq finds the port of a URL that names none.
    An empty one (`host=a,b port=,5433`, or `PGPORT=`) is libpq's default port. `source`
    starts the message: what holds the ports.
    """
    for port in ports.split(","):
        if not port.strip():
            continue
        try:
            number = int(port)
        except ValueError:  # `abc`: libpq's "invalid integer value", no outage either
            number = 0
        if not 1 <= number <= _LARGEST_PORT:
            msg = f"{source}: port {port!r} is not a TCP port (1 to {_LARGEST_PORT})"
            raise ConfigurationError(msg)


def connect_timeout_s(dsn: str) -> int:
    """How long one connect to `dsn` may wait, in seconds, as psycopg reads the session's URL.

    The URL's connect_timeout, else ordo's default; psycopg waits at least 2 s (libpq's rule).
    """
    return timeout_from_conninfo(conninfo_to_dict(session_conninfo(dsn)))


def redacted_dsn(dsn: str) -> str:
    """The server libpq connects to for `dsn`, as host:port/database for messages.

    No user, password or options. What the URL leaves out is what libpq takes: its environment's
    (PGHOST, PGPORT, PGDATABASE, a PGSERVICE's entry) or else its default (port 5432, the
    database named as the user). Read from the URL alone, a URL that left its port to PGPORT was
    named with 5432, so an outage message named a server the connect never tried.
    """
    try:
        given = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<unparsable DSN>"
    try:  # PQconndefaults: the environment as libpq reads it now
        defaults = pq.Conninfo.get_defaults()
    except MemoryError:  # psycopg's error when libpq gives none: name what the URL says
        defaults = []
    environment = {option.keyword.decode(): (option.val or b"").decode() for option in defaults}

    def value(keyword: str) -> str:
        """The URL's value of `keyword` (empty: libpq's default), else the environment's."""
        return str(given[keyword]) if keyword in given else environment.get(keyword, "")

    host = value("host") or value("hostaddr") or "localhost"
    return f"{host}:{value('port') or '5432'}/{value('dbname') or value('user')}"


def _unavailable(dsn: str, exc: psycopg.Error) -> StorageUnavailableError:
    """A connect that failed for an outage, as StorageUnavailableError naming the server."""
    msg = f"cannot connect to PostgreSQL at {redacted_dsn(dsn)}: {exc}".strip()
    return StorageUnavailableError(msg)
