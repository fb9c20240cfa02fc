"""Where bench/append.py and bench/query.py put their data: an empty database per run.

A SQLite file in a directory of its own, or a fresh database on the benchmark's PostgreSQL
server. The scripts subclass the places with what they do to them.

Imported by the bench scripts; running it directly does nothing (`make bench` runs every
bench/*.py file).
"""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Protocol, TypeVar

import psycopg

from _postgres import BenchPostgres, Database


class Place(Protocol):
    """An empty database for one run."""

    @property
    def ordo_url(self) -> str: ...

    def eventsourcing_env(self) -> dict[str, str]: ...

    def count(self, table: str) -> int: ...

    def discard(self) -> None: ...


@dataclass(frozen=True, slots=True)
class SQLitePlace:
    path: Path

    @property
    def ordo_url(self) -> str:
        return f"sqlite:///{self.path}"

    def eventsourcing_env(self) -> dict[str, str]:
        return {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(self.path)}

    def count(self, table: str) -> int:
        with closing(sqlite3.connect(self.path)) as conn:
            return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])

    def discard(self) -> None:
        shutil.rmtree(self.path.parent, ignore_errors=True)


class PostgresPlace:
    def __init__(self, server: BenchPostgres, database: Database) -> None:
        self._server = server
        self._database = database

    @property
    def dsn(self) -> str:
        return self._database.dsn

    @property
    def ordo_url(self) -> str:
        return self._database.dsn

    def eventsourcing_env(self) -> dict[str, str]:
        return self._database.eventsourcing_env()

    def count(self, table: str) -> int:
        with psycopg.connect(self._database.dsn) as conn:
            row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        return -1 if row is None else int(row[0])

    def discard(self) -> None:
        self._server.drop_database(self._database)


SQLitePlaceT = TypeVar("SQLitePlaceT", bound=SQLitePlace)
PostgresPlaceT = TypeVar("PostgresPlaceT", bound=PostgresPlace)


class SQLiteBackend(Generic[SQLitePlaceT]):
    """A new directory under `root` per place, holding the place's file."""

    name = "sqlite"

    def __init__(self, root: Path, place: type[SQLitePlaceT]) -> None:
        self._root = root
        self._place = place
        self._runs = 0

    def new_place(self, label: str) -> SQLitePlaceT:
        self._runs += 1
        directory = self._root / f"{self._runs:02d}-{label}"
        directory.mkdir()
        return self._place(directory / "bench.db")


class PostgresBackend(Generic[PostgresPlaceT]):
    """A fresh database on `server` per place."""

    name = "postgres"

    def __init__(self, server: BenchPostgres, place: type[PostgresPlaceT]) -> None:
        self._server = server
        self._place = place

    def new_place(self, label: str) -> PostgresPlaceT:
        return self._place(self._server, self._server.fresh_database(label))
