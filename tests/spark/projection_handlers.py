"""Handlers for the Spark projection tests (importable by Spark's Python workers)."""

from __future__ import annotations

from ordo.processing import HandlerContext
from ordo.query import EventEnvelope


def count(event: EventEnvelope, context: HandlerContext) -> None:
    """Count each persistence id's events; insist on their order (a gap or repeat raises)."""
    p, conn = context.placeholder, context.connection
    row = conn.execute(f"SELECT n FROM totals WHERE pid = {p}", (event.persistence_id,)).fetchone()  # type: ignore[attr-defined]
    n = row[0] if row else 0
    if event.tag_pid_sequence_nr != n + 1:
        msg = f"{event.persistence_id}: {event.tag_pid_sequence_nr} after {n}"
        raise AssertionError(msg)
    conn.execute(  # type: ignore[attr-defined]
        f"INSERT INTO totals (pid, n) VALUES ({p}, {p}) "
        "ON CONFLICT (pid) DO UPDATE SET n = excluded.n",
        (event.persistence_id, n + 1),
    )
