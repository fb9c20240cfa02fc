"""What one poll of a TagQuery returns to the loop that drives it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic

from ordo.query.ports import R


@dataclass(frozen=True, slots=True)
class Step(Generic[R]):
    """What one poll produced: rows to deliver now, in order, and when to poll again."""

    rows: list[R]
    is_complete: bool
    """A current query has delivered everything it will."""
    wait_ns: int
    """How long to wait before the next poll (0: at once; a notification may cut it short)."""
