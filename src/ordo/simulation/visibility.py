"""When each tag write became visible: logged by writers, read by the checker.

The checker needs it to tell the loss seed 000 warns about (a restarted query does not
back-track before its offset, so an event delayed beyond the eventual-consistency delay whose
offset is before the restart offset is not delivered) from a real loss.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from ordo.tagging import TagWrite

Range = tuple[int, int, int]
"""(from sequence nr, to sequence nr, visible at epoch ns)."""


class VisibilityLog:
    """Appends one JSON line per applied tag write; thread-safe."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def record(self, writes: Sequence[TagWrite]) -> None:
        """Log the writes as visible now."""
        now = time.time_ns()
        lines = "".join(
            json.dumps([w.tag, w.persistence_id, w.from_sequence_nr, w.to_sequence_nr, now]) + "\n"
            for w in writes
        )
        with self._lock:
            self._file.write(lines)

    def close(self) -> None:
        """Flush and close the file."""
        with self._lock:
            self._file.close()


def read_visibility(directory: Path) -> dict[tuple[str, str], list[Range]]:
    """Every logged write of every writer, per (tag, persistence id)."""
    ranges: dict[tuple[str, str], list[Range]] = {}
    for path in sorted(directory.glob("writer-*.jsonl")):
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                tag, pid, first, last, at = json.loads(line)
                ranges.setdefault((tag, pid), []).append((first, last, at))
    return ranges


def visible_ns(ranges: list[Range], sequence_nr: int) -> int | None:
    """When the event with `sequence_nr` first became visible, if it was logged."""
    times = [at for first, last, at in ranges if first <= sequence_nr <= last]
    return min(times, default=None)
