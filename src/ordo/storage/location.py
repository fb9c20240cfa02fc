"""Where a journal lives: parsing `sqlite:///path`, plain paths and PostgreSQL URLs or conninfo."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ordo.errors import (
    ConfigurationError,
    MissingFolderError,
    StorageAccessError,
    UnknownUrlSchemeError,
)
from ordo.storage.file_errors import file_system_error, require_nameable
from ordo.storage.sqlite.driver_errors import IN_MEMORY, IN_MEMORY_REFUSAL


@dataclass(frozen=True, slots=True, kw_only=True)
class SQLiteLocation:
    """An SQLite file, the embedded default."""

    path: Path


@dataclass(frozen=True, slots=True, kw_only=True)
class PostgresLocation:
    """A PostgreSQL database, given as a libpq connection URL or key=value conninfo string."""

    dsn: str


Location = SQLiteLocation | PostgresLocation

_SCHEMES = ("sqlite", "postgresql", "postgres")
# A libpq conninfo string (`host=db dbname=app`) starts with one of these keywords: psycopg users
# pass them as often as URLs, and read as a path one would become an SQLite file of that name.
_CONNINFO = re.compile(
    r"\s*(host|hostaddr|port|dbname|user|password|passfile|service|options|sslmode"
    r"|application_name|connect_timeout|target_session_attrs)\s*="
)


def parse_location(url: str, *, what: str = "journal") -> Location:
    """Parse a database URL into a location; `what` names the database in errors.

    Accepted: `sqlite:///rel/path.db`, `sqlite:////abs/path.db`, a plain file path,
    `postgresql://user@host:port/db?options=-csearch_path%3Dschema`, or a libpq conninfo
    string that starts with a connection keyword (`host=... dbname=...`). Journals, CDC sources
    and sinks are all given so: an error says which one is wrong ("unknown source URL scheme").
    """
    if not isinstance(url, str) or not url.strip():
        msg = f"{what} URL must be a non-empty string (e.g. sqlite:///ordo.db)"
        raise ConfigurationError(msg)
    if "\x00" in url:  # no file name or connection string holds one: a ValueError of the OS
        msg = f"{what} URL must not contain a NUL character: {url!r}"
        raise ConfigurationError(msg)
    if "://" not in url:
        if _CONNINFO.match(url):
            return PostgresLocation(dsn=url)
        _refuse_a_scheme_short_of_its_slashes(url)
        return SQLiteLocation(path=Path(url))
    try:
        scheme = urlsplit(url).scheme.lower()
    except ValueError as exc:  # an unclosed [ of an IPv6 host: a traceback from every command
        msg = f"malformed {what} URL: {exc} (e.g. postgresql://user@host:5432/db)"
        raise ConfigurationError(msg) from exc
    if scheme == "sqlite":
        rest = url.split("://", 1)[1]
        if not rest.startswith("/") or len(rest) < 2:
            msg = f"SQLite URL {url!r} must look like sqlite:///relative.db or sqlite:////abs.db"
            raise ConfigurationError(msg)
        _refuse_a_query_string(url, rest)
        return SQLiteLocation(path=Path(rest[1:]))
    if scheme in ("postgresql", "postgres"):
        return PostgresLocation(dsn=url)
    shown = _without_password(url)
    msg = f"unknown {what} URL scheme {scheme!r} in {shown!r}; use one of: {', '.join(_SCHEMES)}"
    raise UnknownUrlSchemeError(msg)


def _refuse_a_scheme_short_of_its_slashes(url: str) -> None:
    """ConfigurationError for `sqlite:/j.db` or `postgresql:/h/db`: a URL, one slash short.

    Read as a plain path, `ordo init` made a folder `sqlite:` (or `postgresql:`) with a new,
    empty journal in it, where `sqlite://j.db` is refused. A file whose name starts so is
    given as `./sqlite:j.db`.
    """
    scheme, colon, _ = url.partition(":")
    if not colon or scheme.lower() not in _SCHEMES:
        return
    if scheme.lower() == "sqlite":
        msg = f"SQLite URL {url!r} must look like sqlite:///relative.db or sqlite:////abs.db"
    else:
        msg = f"PostgreSQL URL {url!r} must look like postgresql://user@host:port/db"
    raise ConfigurationError(msg)


def _refuse_a_query_string(url: str, rest: str) -> None:
    """ConfigurationError for an SQLite URL with a query string (`sqlite:///j.db?timeout=30`).

    ordo takes none (it sets SQLite's options itself), and the path is read as given, so the
    query became part of the file name: a new, empty journal `j.db?timeout=30` beside the one
    meant. A file whose name holds a `?` is given as a plain path.
    """
    path, mark, query = rest.partition("?")
    if mark:
        msg = (
            f"SQLite URL {url!r} takes no query string ('?{query}'): name the file alone "
            f"(sqlite://{path}), or give a file whose name holds '?' as a plain path"
        )
        raise ConfigurationError(msg)


def _without_password(url: str) -> str:
    """`url` with the password of its user part masked, for a message about the URL itself.

    A misspelt scheme (`postgresq://app:secret@db/shop`) is still a server's URL with a
    password: the error that names the URL must not print it.
    """
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=f"{parts.username}:***@{host}").geturl()


def existing_location(url: str, *, what: str = "journal") -> Location:
    """The location of a journal that is only read: it must exist and be an ordo journal.

    Opening a journal creates a missing SQLite file and migrating gives any database ordo's
    tables, so a misspelt path would become a new, empty journal and an application's database
    would gain ordo's tables. Both backends look without writing. `what` names the database in
    errors, so that a misspelt `--sink` is not refused as "no journal at ...".
    """
    location = parse_location(url, what=what)
    if isinstance(location, PostgresLocation):
        from ordo.storage.postgres.journal_schema import require_journal_schema

        require_journal_schema(location.dsn, what=what)
    else:
        from ordo.storage.sqlite.datastore import require_journal_file

        require_journal_file(location.path, what=what)
    return location


def creatable_location(url: str) -> Location:
    """The location of a journal that may be created, refused early if its folder is missing.

    Opening an SQLite database refuses a missing folder itself (MissingFolderError, see
    `require_folder`); this looks first, for the commands that do other work before they open
    the journal (read stdin, check a CDC source, start Spark), so that they fail at once.
    """
    location = parse_location(url)
    if isinstance(location, SQLiteLocation):
        refuse_in_memory(location.path)
        require_folder(location.path)
    return location


def refuse_in_memory(path: Path, *, what: str = "journal") -> None:
    """StorageAccessError for `:memory:`, which sqlite3 opens as a new in-memory database.

    No ordo database can be one: SQLite keeps it out of WAL mode. Opening it refuses it, but
    the commands that look before they open (`creatable_location`, `pipeline run`'s sink) took
    it for a new file in the working directory: the demo and `pipeline run` started Spark, for
    seconds, before the refusal. `what` names the database, as `require_folder`'s does.
    """
    if str(path) == IN_MEMORY:
        msg = f"cannot open SQLite {what} {path}: {IN_MEMORY_REFUSAL}"
        raise StorageAccessError(msg)


def require_folder(path: Path, *, what: str = "journal") -> None:
    """MissingFolderError unless the folder of the SQLite file `path` exists; creates nothing.

    Every open of an SQLite database (SQLiteDatastore) passes here, so no mode and no caller
    (a `--sink`, a Spark executor's share, the API's `open_stores`) can turn a misspelt folder
    into a tree with a new, empty database in it. As with sqlite3, the file may be new but not
    its folder: only `init_storage` (`ordo init`) creates folders (`create_folders`), as
    `git init a/b` does. A path that can name no file (`unnameable`) is StorageAccessError:
    no folder made for it would hold the file. `what` names the database, as
    `existing_location`'s does.
    """
    refuse_unnameable(path, what=what)
    if not path.parent.is_dir():
        refuse_a_file_as_folder(path, what=what)
        raise MissingFolderError(path)


def refuse_unnameable(path: Path, *, what: str = "journal") -> None:
    """StorageAccessError naming `path` when it can name no file it can reach (`unnameable`)."""
    require_nameable(path, doing=f"no {what} at {path}")


def refuse_a_file_as_folder(path: Path, *, what: str = "journal") -> None:
    """StorageAccessError naming the file where a folder of the SQLite file `path` should be.

    "no folder f", or "create it with `ordo init`", sent the user to make a folder that `ordo
    init` could not make either. No retry mends it until someone moves the file: as
    StorageUnavailableError it was an outage. `what` names the database, as
    `existing_location`'s does.
    """
    file = file_as_folder(path)
    if file is not None:
        msg = f"no {what} at {path}: {file} is a file, not a folder"
        raise StorageAccessError(msg)


def file_as_folder(path: Path) -> Path | None:
    """The file where a folder of `path` should be (the nearest of them that exists), if any."""
    nearest = nearest_existing(path.parent)
    return nearest if nearest is not None and not nearest.is_dir() else None


def nearest_existing(path: Path) -> Path | None:
    """`path` if it exists, else its nearest parent that does (None only if no part does)."""
    return next((part for part in (path, *path.parents) if part.exists()), None)


def create_folders(url: str) -> None:
    """Create the missing folders of the SQLite file at `url` (nothing for PostgreSQL).

    For `init_storage` (`ordo init`), which is for creating journals, and the demo's own
    default file: no other opening of storage creates a folder (`creatable_location`). A folder
    this process may not create is StorageAccessError (`file_system_error`), not an outage.
    """
    location = parse_location(url)
    if isinstance(location, SQLiteLocation):
        refuse_unnameable(location.path)
        refuse_a_file_as_folder(location.path)
        try:
            location.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            doing = f"cannot create the directory of SQLite journal {location.path}"
            raise file_system_error(doing, exc) from exc


def redacted_url(url: str) -> str:
    """`url` for messages: a PostgreSQL one without its password (nor user and options).

    An SQLite URL is shown as given: a path holds no secret, and the user recognizes it.
    """
    if isinstance(parse_location(url), PostgresLocation):
        from ordo.storage.postgres.connection import redacted_dsn

        return f"PostgreSQL at {redacted_dsn(url)}"
    return url
