"""Ctrl-C or SIGTERM at many points of a repair tool's run: the run again does the whole job.

The tools that change stored data (cleanup `delete`, `before` and `expire`; reconcile `delete`,
`rebuild`, `rebuild --all --local [--truncate]`, `truncate`; the repair of `verify --repair`)
write in batches, a transaction each. A user stopped half way runs the command again, and
relies on: no connection left lent and no transaction left open (the run again, or any other
command, is not blocked for the pool's timeout, or by SQLite's write lock); no writer lease or
guard refusing the run again; and the run again leaving every table it touches (tag_views,
tag_write_progress, tag_scanning, the expiry horizons, messages, the tokens, the leases) as an
uninterrupted run does. Each tool is interrupted (KeyboardInterrupt, what Ctrl-C and a
command's SIGTERM raise) as the n-th C call of its thread returns (`interrupt_support`), at
every call on SQLite and at points spread over its whole run on PostgreSQL (`POINTS`), from the
same stored state each time. Within psycopg_pool
the interrupt is spared: its `getconn` loses a connection it took when interrupted before it
returns, a window of the library no caller can close (`ordo.storage.postgres.lent_connection`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import ExitStack, closing
from datetime import timedelta

import pytest

from connection_loss_support import Sessions
from interrupt_support import c_calls, interrupted_after
from operations_support import WRITE, execute, execute_all
from ordo import NewEvent, open_journal
from ordo.clock import ManualClock
from ordo.processing.token import TrackingToken
from ordo.settings import OperationsSettings
from ordo.storage.location import SQLiteLocation, parse_location
from ordo.storage.migration import METADATA_TABLE
from ordo.storage.open import open_stores
from ordo.storage.postgres.datastore import POOL_MAX_SIZE
from ordo.storage.stores import Stores
from ordo.time import TimeUUID
from ordo.tools.cleanup import Cleanup
from ordo.tools.reconciliation import Reconciliation
from ordo.types import PersistenceId, Tag

NOW_NS = 1_900_000_000 * 10**9
"""The tools' clock: a fixed now, so that every run computes the same cutoff (a horizon)."""
HOUR_NS = 3_600 * 10**9
SMALL_BATCHES = OperationsSettings(rows_per_batch=3)
"""Several batches, so several transactions, in each tool that batches."""
POINTS = 40
"""Interrupts per tool on PostgreSQL, spread over its run. Every C call there (300 to 2,200 per
tool, 6,500 in all) takes five minutes: swept so once as this test was written, and passed; the
windows between two transactions are each many calls wide. On SQLite (2,400 calls in all)
every call is tried, in seconds."""
TABLES = (
    METADATA_TABLE,
    "messages",
    "all_persistence_ids",
    "tag_views",
    "tag_write_progress",
    "tag_scanning",
    "tokens",
    "writer_leases",
    "writer_lease_pids",
)
"""What the tools write, or read to decide (tokens, leases): saved, restored and compared."""
OPEN_TRANSACTION = "starts_with(state, 'idle in transaction')"

Operation = Callable[[Stores, ManualClock], object]

OPERATIONS: dict[str, Operation] = {
    "cleanup expire": lambda stores, clock: Cleanup.of(
        stores, settings=SMALL_BATCHES, clock=clock
    ).expire(timedelta(hours=1)),
    "cleanup before --tag": lambda stores, clock: Cleanup.of(
        stores, settings=SMALL_BATCHES, clock=clock
    ).delete_tag_views_before((NOW_NS - HOUR_NS) // 10**6, tag=Tag("u")),
    "cleanup delete": lambda stores, clock: Cleanup.of(stores, clock=clock).delete_persistence_ids(
        [PersistenceId("p1"), PersistenceId("p2")]
    ),
    "reconcile delete": lambda stores, clock: Reconciliation.of(
        stores, clock=clock
    ).delete_tag_views(PersistenceId("p0")),
    "reconcile rebuild": lambda stores, clock: Reconciliation.of(
        stores, clock=clock
    ).rebuild_tag_views(PersistenceId("p1")),
    "reconcile rebuild --all --local --truncate": lambda stores, clock: _truncate_and_rebuild(
        Reconciliation.of(stores, settings=SMALL_BATCHES, clock=clock)
    ),
    "verify --repair": lambda stores, clock: Reconciliation.of(stores, clock=clock).rebuild_pairs(
        [(Tag("u"), PersistenceId("p1")), (Tag("t"), PersistenceId("p2"))]
    ),
}


def _truncate_and_rebuild(reconciliation: Reconciliation) -> object:
    """What `ordo reconcile rebuild --all --local --truncate` runs."""
    reconciliation.truncate()
    return reconciliation.rebuild_all_locally()


@pytest.mark.parametrize("name", list(OPERATIONS))
def test_a_tool_interrupted_anywhere_completes_when_run_again(journal_url: str, name: str) -> None:
    operation = OPERATIONS[name]
    is_sqlite = isinstance(parse_location(journal_url), SQLiteLocation)
    sessions = None if is_sqlite else Sessions(journal_url)
    url = journal_url if sessions is None else sessions.url
    _write(url)
    sparing = "" if is_sqlite else "psycopg_pool"
    clock = ManualClock(NOW_NS)
    with closing(open_stores(url)) as stores:
        _save(url)
        operation(stores, clock)
        expected = _snapshot(url)
        _restore(url)
        with c_calls(sparing=sparing) as counted:
            operation(stores, clock)
        assert _snapshot(url) == expected  # the run is the same each time
        points = list(range(1, counted[0] + 1)) if is_sqlite else _spread(counted[0], POINTS)
        interrupted = 0
        for calls in points:
            _restore(url)
            try:
                with interrupted_after(calls, sparing=sparing):
                    operation(stores, clock)
            except KeyboardInterrupt:
                interrupted += 1
                _assert_nothing_held(stores, url, sessions, at=calls)
            operation(stores, clock)  # unforced: no lease or guard may refuse it
            assert _snapshot(url) == expected, f"{name} interrupted at C call {calls}"
        assert interrupted > len(points) // 2


def _write(url: str) -> None:
    """Events of tags t and u three hours ago and now, over three ids; then what a repair mends.

    p0's first two events are deleted from the journal (their rows and numbering are kept); p1's
    rows of u and p2's tag_scanning are gone, as a crash or a mistake leaves them. A processor
    has read every row, so the expiry is not refused.
    """
    clock = ManualClock(NOW_NS - 3 * HOUR_NS)
    with open_journal(url, settings=WRITE, clock=clock) as journal:
        for n in range(12):
            journal.append(f"p{n % 3}", [NewEvent.of(n, tags=["t", "u"][: 1 + n % 2])])
        clock.advance(3 * HOUR_NS)
        for n in range(6):
            journal.append(f"p{n % 3}", [NewEvent.of(n, tags=["u", "t"][: 1 + n % 2])])
        journal.delete_to("p0", 2)
    execute(url, "DELETE FROM tag_views WHERE persistence_id = 'p1' AND tag = 'u'")
    execute(url, "DELETE FROM tag_scanning WHERE persistence_id = 'p2'")
    newest = max(TimeUUID(bytes(r[0])) for r in execute(url, "SELECT timeuuid FROM tag_views"))
    with closing(open_stores(url)) as stores:
        stores.tokens.initialize("reader", segment_count=1)
        stores.tokens.claim("reader", 0, "me", now_ms=0, claim_timeout_ms=1)
        with stores.tokens.batch("reader", 0, "me") as batch:
            batch.store_token(TrackingToken(newest))
        stores.tokens.release("reader", 0, "me")


def _save(url: str) -> None:
    execute_all(
        url,
        [(f"CREATE TABLE saved_{table} AS SELECT * FROM {table}", ()) for table in TABLES],
    )


def _restore(url: str) -> None:
    """Every table as `_save` found it."""
    execute_all(
        url,
        [
            (statement, ())
            for table in TABLES
            for statement in (
                f"DELETE FROM {table}",
                f"INSERT INTO {table} SELECT * FROM saved_{table}",
            )
        ],
    )


def _snapshot(url: str) -> dict[str, list[str]]:
    """Every row of every table, each as its repr (byte columns as bytes), in order."""
    tables = execute_all(url, [(f"SELECT * FROM {table}", ()) for table in TABLES])
    return {
        table: sorted(
            repr(tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)) for row in rows
        )
        for table, rows in zip(TABLES, tables, strict=True)
    }


def _spread(total: int, points: int) -> list[int]:
    """About `points` C call numbers from 1 to `total`, evenly apart."""
    return sorted({1 + total * i // points for i in range(points)})


def _assert_nothing_held(stores: Stores, url: str, sessions: Sessions | None, *, at: int) -> None:
    """No transaction open, no connection lent: checked while the interrupt is still handled."""
    if sessions is None:
        location = parse_location(url)
        assert isinstance(location, SQLiteLocation)
        path = location.path
        with closing(sqlite3.connect(path, timeout=0)) as other:
            other.execute("BEGIN IMMEDIATE")  # "database is locked" if a write is open
            other.execute("ROLLBACK")
        return
    assert sessions.count(OPEN_TRANSACTION) == 0, f"a transaction open at C call {at}"
    db = stores.operations._db  # type: ignore[attr-defined]
    with ExitStack() as stack:  # every connection of the pool is lent again
        for _ in range(POOL_MAX_SIZE):
            stack.enter_context(db.connection()).execute("SELECT 1")
