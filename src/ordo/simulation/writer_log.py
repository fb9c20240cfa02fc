"""When each event was appended and each tag write became visible: written by the writers.

The checker needs the visibility to tell the loss seed 000 warns about (a restarted query does
not back-track before its offset, so an event delayed beyond the eventual-consistency delay
whose offset is before the restart offset is not delivered) from a real loss, and the append
times for latency. An event's offset is no append time: a writer's clock is skewed, and a
writer that takes an id over issues its offsets after the previous writer's, whose clock may
be seconds ahead (latency computed from the offset minus the writer's skew came out negative).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ordo.journal import AppendReceipt
from ordo.tagging import TagWrite

Range = tuple[int, int, int]
"""(from sequence nr, to sequence nr, visible at epoch ns)."""


class WriterLog:
    """Appends one JSON line per append and per applied tag write; thread-safe."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def appended(self, receipt: AppendReceipt, started_ns: int) -> None:
        """Log the receipt's events as appended by a call that started at `started_ns`.

        The start of the call that wrote them, read on the machine's clock unskewed: no earlier
        than their rows can be visible, so that no latency from it is negative.
        """
        first, last = receipt.first_sequence_nr, receipt.last_sequence_nr
        self._write(json.dumps(["appended", receipt.persistence_id, first, last, started_ns]))

    def applied(self, writes: Sequence[TagWrite]) -> None:
        """Log the tag writes as visible now."""
        now = time.time_ns()
        self._write(
            "\n".join(
                json.dumps(
                    ["applied", w.tag, w.persistence_id, w.from_sequence_nr, w.to_sequence_nr, now]
                )
                for w in writes
            )
        )

    def close(self) -> None:
        """Flush and close the file."""
        with self._lock:
            self._file.close()

    def _write(self, lines: str) -> None:
        if lines:
            with self._lock:
                self._file.write(lines + "\n")


@dataclass(frozen=True, slots=True)
class WriterLogs:
    """Every writer's log, read back."""

    visible: dict[tuple[str, str], list[Range]]
    """(tag, persistence id) -> the ranges of its tag writes and when each became visible."""
    appended_ns: dict[tuple[str, int], int]
    """(persistence id, sequence nr) -> when the append that wrote the event started."""


def read_writer_logs(directory: Path) -> WriterLogs:
    """Every logged append and tag write of every writer."""
    logs = WriterLogs(visible={}, appended_ns={})
    for path in sorted(directory.glob("writer-*.jsonl")):
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                match json.loads(line):
                    case ["appended", pid, first, last, at]:
                        logs.appended_ns.update({(pid, nr): at for nr in range(first, last + 1)})
                    case ["applied", tag, pid, first, last, at]:
                        logs.visible.setdefault((tag, pid), []).append((first, last, at))
    return logs


def visible_ns(ranges: list[Range], sequence_nr: int) -> int | None:
    """When the event with `sequence_nr` first became visible, if it was logged."""
    times = [at for first, last, at in ranges if first <= sequence_nr <= last]
    return min(times, default=None)
