"""PostgreSQL for the benchmarks: one throwaway server, a fresh database for every run.

Imported by the bench scripts; running it directly does nothing (`make bench` runs every
bench/*.py file).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg
from psycopg import sql

from ordo.storage.postgres.throwaway import ThrowawayPostgres


@dataclass(frozen=True, slots=True, kw_only=True)
class Database:
    """One fresh database on the benchmark server."""

    name: str
    host: str
    port: int
    user: str

    @property
    def dsn(self) -> str:
        return f"postgresql://{self.user}@{self.host}:{self.port}/{self.name}"

    def eventsourcing_env(self) -> dict[str, str]:
        """The variables eventsourcing's PostgreSQL persistence module reads."""
        return {
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "POSTGRES_DBNAME": self.name,
            "POSTGRES_HOST": self.host,
            "POSTGRES_PORT": str(self.port),
            "POSTGRES_USER": self.user,
            "POSTGRES_PASSWORD": "",  # the throwaway server trusts local connections
        }


class BenchPostgres:
    """A ThrowawayPostgres that hands out a new, empty database per benchmark run."""

    def __init__(self, server: ThrowawayPostgres) -> None:
        self._server = server
        self._numbers = itertools.count(1)

    @property
    def version(self) -> str:
        with psycopg.connect(self._server.dsn) as conn:
            row = conn.execute("SHOW server_version").fetchone()
        return "?" if row is None else str(row[0])

    def fresh_database(self, label: str) -> Database:
        name = f"bench_{next(self._numbers)}_{label}"
        with psycopg.connect(self._server.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return Database(name=name, host="127.0.0.1", port=self._server.port, user="postgres")

    def drop_database(self, database: Database) -> None:
        with psycopg.connect(self._server.dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(database.name)
                )
            )


@contextmanager
def bench_postgres() -> Iterator[BenchPostgres]:
    """Start one private PostgreSQL server for the whole benchmark; stop it afterwards."""
    with ThrowawayPostgres() as server:
        yield BenchPostgres(server)
