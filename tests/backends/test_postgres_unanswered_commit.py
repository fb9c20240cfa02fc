"""An append whose session ended while the server committed it: written, though it failed.

The server commits, then waits for a synchronous standby that never answers (a
`synchronous_standby_names` naming none that exists); ending the session there fails the call
with StorageUnavailableError although the transaction "has already committed locally", as a
session lost between a commit and its answer does (see connection_loss_support).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
import pytest

from connection_loss_support import Sessions
from ordo import NewEvent, open_journal
from ordo.errors import StorageUnavailableError
from ordo.storage.open import stores_at
from ordo.tools.verification import check_tag_views_of
from processing_support import WRITE, wait_for

pytestmark = pytest.mark.postgres

_NO_STANDBY = "ordo_no_such_standby"


def _durable(url: str) -> str:
    """`url` whose sessions' commits wait for the standbys (`synchronous_commit=on`).

    The throwaway server's default (off) waits for none. Added to the URL's `options`, which
    name the test's schema.
    """
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    options = [value for key, value in query if key == "options"]
    query = [(key, value) for key, value in query if key != "options"]
    query.append(("options", " ".join([*options, "-csynchronous_commit=on"])))
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))


def _reload(server_dsn: str, standbys: str | None) -> None:
    """Set (None: reset) synchronous_standby_names server-wide; return once new sessions see it.

    The postmaster reloads its configuration on its own time, and each new session starts
    with what it read.
    """
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        if standbys is None:
            conn.execute("ALTER SYSTEM RESET synchronous_standby_names")
        else:
            conn.execute(f"ALTER SYSTEM SET synchronous_standby_names = '{standbys}'")
        conn.execute("SELECT pg_reload_conf()")

    def seen() -> bool:
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            row = conn.execute("SHOW synchronous_standby_names").fetchone()
        return row is not None and row[0] == (standbys or "")

    wait_for(seen)


@contextmanager
def _unanswered_commits(server_dsn: str) -> Iterator[None]:
    """Within the block, a session that commits a write waits for a standby that never comes."""
    _reload(server_dsn, _NO_STANDBY)
    try:
        yield
    finally:
        _reload(server_dsn, None)


def test_an_append_whose_commit_went_unanswered_is_numbered_after_and_tagged(
    sessions: Sessions, postgres_server_dsn: str
) -> None:
    """The append after it numbers on, and the tag views of both are written.

    The journal kept the id's state from before the failed append, so the next one wrote after
    it: an append with no expected sequence nr failed with ConcurrencyConflictError ("another
    writer appended"), and the committed events' tag views were never handed to a tag writer
    (queries by tag did not deliver them while the journal ran).
    """
    failures: list[BaseException] = []
    with open_journal(_durable(sessions.url), settings=WRITE) as journal:
        journal.append("a", [NewEvent.of({"i": 0}, tags=["t"])])
        journal.flush()

        def append() -> None:
            try:
                journal.append("a", [NewEvent.of({"i": 1}, tags=["t"])])
            except BaseException as exc:  # reported by the test
                failures.append(exc)

        with _unanswered_commits(postgres_server_dsn):
            assert sessions.terminate() >= 1  # the pool's next sessions read the setting
            appending = threading.Thread(target=append)
            appending.start()
            wait_for(lambda: sessions.count("wait_event = 'SyncRep'") > 0)
            assert sessions.terminate() >= 1
            appending.join()
        assert [type(e) for e in failures] == [StorageUnavailableError]
        journal.append("a", [NewEvent.of({"i": 2}, tags=["t"])])
        journal.flush()
        payloads = [e.payload for e in journal.replay("a")]
    assert payloads == [{"i": 0}, {"i": 1}, {"i": 2}]
    with stores_at(sessions.url) as stores:
        report = check_tag_views_of(stores, WRITE.bucket_size)
    assert report.is_clean, report
    assert (report.tagged_events, report.tag_view_rows) == (3, 3)
