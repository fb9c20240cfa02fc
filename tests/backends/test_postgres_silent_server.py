"""A statement in flight when the server goes silent: no answer and no reset, ever.

A frozen proxy cannot stand for that: its host's kernel still acknowledges every packet and
answers keepalive probes. Taking the loopback link down can, in a network namespace of its own
(`unshare -n`, as root): nothing sent arrives any more, and nothing reports it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from ordo.storage.postgres.connection import session_conninfo

_IN_NAMESPACE = textwrap.dedent(
    """
    import subprocess, threading, time
    from ordo.errors import StorageUnavailableError
    from ordo.storage.postgres import connection, datastore
    from ordo.storage.postgres.throwaway import ThrowawayPostgres

    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    # short defaults, but a first probe after an hour: the URL's own keepalives_idle must win
    connection.SILENT_SERVER_DEFAULTS = {
        "keepalives_idle": 3600, "keepalives_interval": 1, "tcp_user_timeout": 1500
    }
    with ThrowawayPostgres() as server:
        store = datastore.PostgresDatastore(server.dsn + "?keepalives_idle=1")
        failures = []

        def read():
            try:
                with store.connection() as conn:
                    conn.execute("SELECT pg_sleep(1)")
            except StorageUnavailableError as exc:
                failures.append(exc)

        thread = threading.Thread(target=read, daemon=True)
        thread.start()
        time.sleep(0.3)  # the statement is in flight
        subprocess.run(["ip", "link", "set", "lo", "down"], check=True)
        started = time.monotonic()
        thread.join(timeout=20)
        print(f"{time.monotonic() - started:.1f}", failures)
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
        store.close()
    """
)


def test_the_urls_own_values_win_over_the_defaults() -> None:
    conninfo = session_conninfo(
        "postgresql://u@h/db?keepalives_idle=1&tcp_user_timeout=0&connect_timeout=3"
    )
    assert "connect_timeout=3 " in conninfo + " "  # ordo's 10 s replaced the URL's before
    assert "keepalives_idle=1 " in conninfo + " "
    assert "tcp_user_timeout=0 " in conninfo + " "
    assert "keepalives_interval=5 " in conninfo + " "
    assert "keepalives_count=4 " in conninfo + " "


@pytest.mark.postgres
@pytest.mark.skipif(
    os.geteuid() != 0,
    reason="a network namespace needs root (scripts/bootstrap installs ip; unshare is Debian's)",
)
def test_a_statement_in_flight_when_the_server_goes_silent_fails_in_bounded_time() -> None:
    """It waited forever: no error, and no reconnection path ran."""
    ran = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", _IN_NAMESPACE],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=True,
    )
    lasted, failures = ran.stdout.split(maxsplit=1)
    assert float(lasted) < 15, ran.stdout
    assert "PostgreSQL is unavailable" in failures, ran.stdout
