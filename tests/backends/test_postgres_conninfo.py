"""What libpq would refuse only while connecting is refused before: a ConfigurationError."""

from __future__ import annotations

import pytest

from ordo.errors import ConfigurationError
from ordo.storage.postgres.connection import session_conninfo


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
