"""Shared fixtures: Hypothesis profiles, the PostgreSQL server every backend test uses, Spark.

PostgreSQL tests are never skipped. Unless ORDO_TEST_POSTGRES_DSN names a server, the
first test that needs one starts a private ThrowawayPostgres for the whole run; if that
fails the test errors, and the message says to run scripts/bootstrap.
"""

from __future__ import annotations

import os
import secrets
import signal
from collections.abc import Callable, Iterator
from contextlib import ExitStack, closing, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest
from hypothesis import settings
from psycopg import sql

from memory_support import use_memory_for_temporary_files
from ordo.clock import Clock
from ordo.journal import Journal
from ordo.settings import EventsByTagSettings
from ordo.storage.open import open_journal, open_stores
from ordo.storage.postgres.throwaway import ThrowawayPostgres
from ordo.storage.stores import Stores
from postgres_source_support import with_server_option
from spark_classes_support import JVM_OPTIONS, class_archive_options

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# deadline=None: database-backed properties have slow, uneven examples.
settings.register_profile("dev", max_examples=50, deadline=None)
settings.register_profile("ci", max_examples=200, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

use_memory_for_temporary_files()  # before the first temporary file: memory_support says why

# Spark's launcher adds SPARK_SUBMIT_OPTS to the command of every driver JVM: the session
# fixture's, and those of the `ordo` commands, drivers and bench scripts the tests start (they
# inherit this environment). The tests' Spark jobs are small, so a JVM's start is most of
# their time: compiling with C1 only and the serial collector start Spark about a third
# sooner on a 2-CPU machine, where C2 and G1's threads contend with the start itself. The
# same Spark runs, only its JIT and collector differ; a SPARK_SUBMIT_OPTS of the caller wins.
# The JVMs also map Spark's classes from an archive the first run makes (spark_classes_support).
if "SPARK_SUBMIT_OPTS" not in os.environ:
    os.environ["SPARK_SUBMIT_OPTS"] = class_archive_options(JVM_OPTIONS)

# A command started in the background by a shell without job control (`make test &` in a
# script, a CI runner's step) ignores SIGINT, and so does every process it starts, Python
# included: the tests that Ctrl-C a command saw it run on (exit 0, or a hang to a timeout).
# Caught here, SIGINT is back to its default in each command the tests start (exec resets a
# caught signal, not an ignored one).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def postgres_server_dsn() -> Iterator[str]:
    """A superuser DSN for the run's PostgreSQL server, started on first use."""
    external = os.environ.get("ORDO_TEST_POSTGRES_DSN")
    if external:
        yield external
        return
    with ThrowawayPostgres() as server:
        yield server.dsn


@pytest.fixture
def postgres_dsn(postgres_server_dsn: str) -> Iterator[str]:
    """A DSN whose search_path is a fresh, empty schema that is dropped after the test.

    Tests that run in parallel or leave tables behind cannot see each other this way.
    """
    with _fresh_schema(postgres_server_dsn) as dsn:
        yield dsn


@contextmanager
def _fresh_schema(server_dsn: str) -> Iterator[str]:
    schema = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    yield with_server_option(server_dsn, f"-csearch_path={schema}")
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def journal_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an empty journal, once per backend: an SQLite file, or a fresh schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'journal.db'}"
    dsn: str = request.getfixturevalue("postgres_dsn")
    return dsn


@pytest.fixture
def stores(journal_url: str) -> Iterator[Stores]:
    """The stores at `journal_url` (schema created), for looking at what journals wrote."""
    opened = open_stores(journal_url)
    yield opened
    opened.close()


@pytest.fixture
def sink_stores(
    request: pytest.FixtureRequest, journal_url: str, tmp_path: Path
) -> Iterator[Stores]:
    """Stores in a second database of `journal_url`'s backend, as a projection's own sink."""
    with ExitStack() as stack:
        if journal_url.startswith("sqlite:"):
            url = f"sqlite:///{tmp_path / 'sink.db'}"
        else:
            url = stack.enter_context(_fresh_schema(request.getfixturevalue("postgres_server_dsn")))
        yield stack.enter_context(closing(open_stores(url)))


@pytest.fixture
def journal_factory(journal_url: str) -> Iterator[Callable[..., Journal]]:
    """Opens Journals at `journal_url` (keywords as open_journal's); closes them all after."""
    opened: list[Journal] = []

    def factory(
        *, settings: EventsByTagSettings | None = None, clock: Clock | None = None
    ) -> Journal:
        journal = open_journal(journal_url, settings=settings, clock=clock)
        opened.append(journal)
        return journal

    yield factory
    for journal in reversed(opened):
        journal.close()


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The run's one SparkSession (ordo's sources registered); commands run in-process reuse it."""
    from ordo.spark import start_session

    session = start_session(master="local[2]", app_name="ordo-tests")
    yield session
    session.stop()
