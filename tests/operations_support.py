"""Helpers of the operations tests: journals from several writers, raw SQL, row snapshots."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from contextlib import closing
from datetime import timedelta
from typing import Any

import psycopg

from ordo import EventsByTagSettings, NewEvent, open_journal
from ordo.storage.location import SQLiteLocation, parse_location
from processing_support import wait_for

WRITE = EventsByTagSettings(flush_interval=timedelta(milliseconds=5), max_message_batch_size=7)
TAG_VIEW_COLUMNS = "tag, timebucket, timeuuid, persistence_id, tag_pid_sequence_nr, sequence_nr"


def write_with_writers(url: str, *, writers: int = 3, pids: int = 4, appends: int = 6) -> None:
    """Several journals (one per thread, each its own writer) append to their own ids.

    Events carry tags `a`, `b` or both, appends hold one to three events, and the tag writers
    batch and flush as in production (small batches, short flush interval).
    """

    def write(writer: int) -> None:
        with open_journal(url, settings=WRITE) as journal:
            for n in range(appends):
                for p in range(pids):
                    tags = (["a"], ["b"], ["a", "b"])[(n + p + writer) % 3]
                    events = [
                        NewEvent.of({"w": writer, "n": n, "k": k}, tags=tags)
                        for k in range(1 + (n + p) % 3)
                    ]
                    journal.append(f"w{writer}-p{p}", events)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def execute(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one statement (`?` placeholders) on either backend; returns the rows, if any."""
    return execute_all(url, [(sql, params)])[0]


def execute_all(
    url: str, statements: Sequence[tuple[str, tuple[Any, ...]]]
) -> list[list[tuple[Any, ...]]]:
    """Run the statements (`?` placeholders) in one transaction on one connection; their rows.

    One connection for many statements: a test that reads or rewrites every table at each of
    many points would otherwise spend its time connecting to PostgreSQL.
    """
    location = parse_location(url)
    if isinstance(location, SQLiteLocation):
        with closing(sqlite3.connect(location.path)) as conn, conn:
            return [conn.execute(sql, params).fetchall() for sql, params in statements]
    with psycopg.connect(location.dsn) as pg:  # one transaction, committed at the end
        results = []
        for sql, params in statements:
            cursor = pg.execute(sql.replace("?", "%s"), params)
            results.append([tuple(row) for row in cursor.fetchall()] if cursor.description else [])
        return results


def duplicate_tag_view(url: str, tag: str, persistence_id: str, tag_pid_sequence_nr: int) -> None:
    """Copy an event's tag_views row to the offset of the id's next one: the event is there twice.

    As a tag write retried after a crash, or a reconciliation, can leave it.
    """
    execute(
        url,
        "INSERT INTO tag_views SELECT later.tag, later.timebucket, later.timeuuid, "
        "copied.persistence_id, copied.tag_pid_sequence_nr, copied.sequence_nr, "
        "copied.persistence_id_hash, copied.writer_uuid, copied.serializer, copied.manifest, "
        "copied.payload, copied.metadata, copied.tags FROM tag_views copied JOIN tag_views later "
        "ON later.tag = copied.tag AND later.persistence_id = copied.persistence_id "
        "AND later.tag_pid_sequence_nr = copied.tag_pid_sequence_nr + 1 "
        "WHERE copied.tag = ? AND copied.persistence_id = ? AND copied.tag_pid_sequence_nr = ?",
        (tag, persistence_id, tag_pid_sequence_nr),
    )


def tag_view_rows(url: str) -> set[tuple[Any, ...]]:
    """Every tag_views row's key, sequence nr and payload (timeuuid as hex)."""
    rows = execute(url, f"SELECT {TAG_VIEW_COLUMNS}, payload, persistence_id_hash FROM tag_views")
    return {(r[0], r[1], bytes(r[2]).hex(), r[3], r[4], r[5], bytes(r[6]), r[7]) for r in rows}


def progress_rows(url: str) -> set[tuple[Any, ...]]:
    """Every tag_write_progress row."""
    rows = execute(
        url,
        "SELECT persistence_id, tag, sequence_nr, tag_pid_sequence_nr, timeuuid "
        "FROM tag_write_progress",
    )
    return {(r[0], r[1], r[2], r[3], bytes(r[4]).hex()) for r in rows}


def one_row(url: str, tag: str, pid: str, number: int) -> tuple[Any, ...]:
    """The key columns of one row (tag, bucket, timeuuid, pid, nr, seq)."""
    rows = execute(
        url,
        f"SELECT {TAG_VIEW_COLUMNS} FROM tag_views WHERE tag = ? AND persistence_id = ? "
        "AND tag_pid_sequence_nr = ?",
        (tag, pid, number),
    )
    assert len(rows) == 1, rows
    return rows[0]


def wait_for_a_lock_wait(
    dsn: str, statement: str, *, sessions: int = 1, unless_ended: threading.Thread | None = None
) -> None:
    """Return once `sessions` sessions of the PostgreSQL server at `dsn` running `statement`
    (a part of its text) wait for a lock: a transaction held open on another connection
    blocks them. Or once the thread `unless_ended` has ended: what it ran took no lock that
    made it wait, which the test then tells by its outcome (code that should have waited and
    did not fails an assertion, not this wait)."""

    def waiting() -> bool:
        if unless_ended is not None and not unless_ended.is_alive():
            return True
        rows = execute(
            dsn,
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND position(? IN query) > 0",
            (statement,),
        )
        return bool(rows[0][0] >= sessions)

    wait_for(waiting, what=f"{sessions} sessions running {statement!r} to wait for a lock")
