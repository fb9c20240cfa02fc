"""Where a PostgreSQL journal is: the search_path's schema, and whether it holds ordo's tables."""

from __future__ import annotations

import psycopg

from ordo.errors import StorageAccessError, StorageUnavailableError
from ordo.storage.migration import METADATA_TABLE
from ordo.storage.postgres.connection import connect, redacted_dsn


def require_journal_schema(dsn: str, *, what: str = "journal") -> None:
    """Refuse a database (schema by the URL's search_path) without ordo's metadata table.

    One short connection that only reads, so that a command that reads does not give an
    application's database ordo's tables. The message names the schema looked in and the
    database's schemas that hold a journal: with a URL that selects no schema or the wrong
    one, "no ordo journal" alone did not tell that the journal is one search_path away.
    `what` names the database (a projection's "sink database" is an ordo database too).

    StorageUnavailableError, as an SQLite file without ordo's tables (`require_journal_file`):
    the journal may not be there yet, which `ordo init` or a writer's first open creates.
    """
    with connect(dsn) as conn:
        if has_metadata(conn):
            return
        schema = current_schema(conn, dsn)
        others = [
            str(name)
            for (name,) in conn.execute(
                "SELECT DISTINCT relnamespace::regnamespace::text FROM pg_class "
                "WHERE relname = %s AND relkind IN ('r', 'p') ORDER BY 1",
                (METADATA_TABLE,),
            )
        ]
    msg = f"no ordo {what} in PostgreSQL at {redacted_dsn(dsn)} in schema {schema!r}"
    if what == "journal":
        msg += ": create it with `ordo init`"
    if others:
        shown = ", ".join(repr(name) for name in others[:5]) + (", ..." if others[5:] else "")
        schemas, pick = ("schemas", "one") if others[1:] else ("schema", "it")
        msg += (
            f"; this database holds one in {schemas} {shown} "
            f"(select {pick} with ?options=-csearch_path%3D{others[0]} in the URL)"
        )
    raise StorageUnavailableError(msg)


def current_schema(conn: psycopg.Connection[tuple[object, ...]], dsn: str) -> str:
    """The schema ordo's tables are created in: the search_path's first usable one.

    StorageAccessError when the search_path names none the user may use: a misspelt or not
    yet created schema, or one without USAGE granted (PostgreSQL skips both alike).
    PostgreSQL's own "no schema has been selected to create in" came from the middle of a
    migration and did not name the search_path. ordo creates no schema and grants nothing, so
    no retry mends it until someone creates the schema, grants USAGE or changes the URL: as
    StorageUnavailableError it was an outage.
    """
    row = conn.execute(
        "SELECT current_schema(), current_setting('search_path'), current_user, "
        "ARRAY(SELECT nspname::text FROM pg_namespace WHERE quote_ident(nspname) = ANY("
        "regexp_split_to_array(current_setting('search_path'), '\\s*,\\s*')) "
        "AND NOT has_schema_privilege(oid, 'USAGE') ORDER BY 1)"
    ).fetchone()
    assert row is not None  # noqa: S101 - a SELECT without FROM returns one row
    schema, search_path, user, denied = row
    if schema is not None:
        return str(schema)
    where = f"PostgreSQL at {redacted_dsn(dsn)}"
    if isinstance(denied, list) and denied:
        msg = (
            f"{where}: user {user!r} may not use schema {denied[0]!r} of the search_path "
            f"{search_path!r} (GRANT USAGE ON SCHEMA {denied[0]} TO {user})"
        )
    else:
        msg = (
            f"{where} has no schema of the search_path {search_path!r}: create the schema "
            "(CREATE SCHEMA), or name an existing one in the URL (?options=-csearch_path%3D...)"
        )
    raise StorageAccessError(msg)


def has_metadata(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    """Whether the schema ordo writes to (`current_schema`) holds ordo's metadata table.

    Only that schema: the table alone (to_regclass of its bare name) was looked up along the
    whole search_path, so with `tenant, public` and a journal in public only, `ordo init` found
    public's, created nothing in the tenant's schema, and the tenant wrote into public's journal.
    """
    row = conn.execute(
        "SELECT to_regclass(quote_ident(current_schema()) || '.' || quote_ident(%s)) IS NOT NULL",
        (METADATA_TABLE,),
    ).fetchone()
    return row is not None and bool(row[0])
