"""A tag notification the server refuses is a lost hint, not a failed tag write.

Live queries poll every refresh interval anyway. The NOTIFY runs after a batch's rows and
progress are written, inside the tag writer's write loop: raised from there it passed for a
failed write of rows already written, and any error but an outage stopped every tag writer.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from ordo import EventsByTagSettings, NewEvent, open_journal
from ordo.storage.open import stores_at
from ordo.tools.verification import check_tag_views_of

pytestmark = pytest.mark.postgres


@pytest.fixture
def refusing_notify(postgres_server_dsn: str) -> Iterator[str]:
    """A journal URL in a database of its own where its role may not run pg_notify()."""
    name = f"n_{secrets.token_hex(6)}"
    ident = sql.Identifier(name)
    with psycopg.connect(postgres_server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(ident))
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(ident))
    parts = urlsplit(postgres_server_dsn)
    owned = urlunsplit(parts._replace(path=f"/{name}"))
    with psycopg.connect(owned, autocommit=True) as admin:
        admin.execute("REVOKE EXECUTE ON FUNCTION pg_notify(text, text) FROM PUBLIC")
        admin.execute(sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(ident, ident))
    netloc = f"{name}@{parts.hostname}:{parts.port}"
    yield urlunsplit(
        parts._replace(netloc=netloc, path=f"/{name}", query=f"options=-csearch_path%3D{name}")
    )
    with psycopg.connect(postgres_server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(ident))
        admin.execute(sql.SQL("DROP ROLE {}").format(ident))


def test_a_refused_notification_fails_no_tag_write(refusing_notify: str) -> None:
    settings = EventsByTagSettings(pubsub_notification=True)
    with open_journal(refusing_notify, settings=settings) as journal:
        journal.append("a", [NewEvent.of(1, tags=["t"])])
        journal.flush()
        journal.append("a", [NewEvent.of(2, tags=["t"])])
        journal.flush()
    with stores_at(refusing_notify) as stores:
        report = check_tag_views_of(stores, settings.bucket_size)
    assert report.is_clean, report
    assert (report.tagged_events, report.tag_view_rows) == (2, 2)
