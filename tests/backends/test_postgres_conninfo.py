"""What libpq would refuse only while connecting is refused before: a ConfigurationError; and
the server messages name is the one libpq connects to, the environment's where the URL names
none."""

from __future__ import annotations

import pytest

from ordo.errors import ConfigurationError
from ordo.storage.postgres.connection import redacted_dsn, session_conninfo


@pytest.mark.parametrize("port", ["70000", "0", "abc", "5432,x"])
def test_a_pgport_that_is_no_tcp_port_is_refused_naming_pgport(
    monkeypatch: pytest.MonkeyPatch, port: str
) -> None:
    """libpq's "invalid port number" was a StorageUnavailableError, as if the server were down."""
    monkeypatch.setenv("PGPORT", port)
    bad = port.rpartition(",")[2]
    with pytest.raises(ConfigurationError, match=rf"^PGPORT: port '{bad}' is not a TCP port"):
        session_conninfo("postgresql://u@localhost/db")


@pytest.mark.parametrize("port", ["", "5433", "5432,5433"])
def test_an_empty_pgport_or_one_of_tcp_ports_is_taken(
    monkeypatch: pytest.MonkeyPatch, port: str
) -> None:
    monkeypatch.setenv("PGPORT", port)
    assert "port" not in session_conninfo("postgresql://u@localhost/db")  # libpq reads PGPORT


@pytest.mark.parametrize("url", ["postgresql://u@localhost:5433/db", "host=localhost port="])
def test_a_url_that_names_its_port_leaves_pgport_unread(
    monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    monkeypatch.setenv("PGPORT", "70000")
    session_conninfo(url)  # libpq uses the URL's port (an empty one: its default)


def test_a_server_is_named_with_what_libpq_takes_from_its_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Read from the URL alone, a URL that left its port to PGPORT was named with 5432 (and one
    that left its host to PGHOST with localhost): an outage message named a server the connect
    never tried."""
    monkeypatch.setenv("PGPORT", "6543")
    monkeypatch.setenv("PGHOST", "db.example")
    monkeypatch.setenv("PGDATABASE", "shop")
    monkeypatch.delenv("PGSERVICE", raising=False)
    assert redacted_dsn("postgresql://ada:secret@pg.example/app") == "pg.example:6543/app"
    assert redacted_dsn("postgresql://ada:secret@") == "db.example:6543/shop"
    assert redacted_dsn("postgresql://ada:secret@pg.example:5433/app") == "pg.example:5433/app"
    assert redacted_dsn("host=pg.example port='' dbname=app") == "pg.example:5432/app"  # libpq's
    monkeypatch.delenv("PGDATABASE")
    assert redacted_dsn("postgresql://ada:secret@pg.example") == "pg.example:6543/ada"
