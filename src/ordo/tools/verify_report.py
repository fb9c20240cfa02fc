"""The verdict of `ordo verify`: what differs between the journal and its tag views.

The Spark job (ordo.spark.verify) fills it; the CLI renders it and `--repair` rebuilds the
(tag, persistence id) pairs it names. Each tag_views row is classified once, in this order:

- retained: no journal event, but the event was deleted (delete_to keeps its rows): fine.
- orphaned: no journal event with the row's persistence id, sequence nr, tag and TimeUUID.
- duplicated: another row already stands for the same event (the one with the right number
  and bucket is kept; the others are duplicates).
- misnumbered: the row's tag pid sequence nr is not the one a fresh write gives the event.
- wrong_bucket: the row is not in its TimeUUID's time bucket.

Then, from the journal's side, `missing`: a tagged event without any row; and from the
numbers of the kept rows of each (tag, persistence id), `gap`: numbers absent from the first
number of an event still in the journal to the highest (the numbers of deleted events whose rows
were deleted too are lost for good, and no repair can fill them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ordo.time import format_epoch_ms
from ordo.types import PersistenceId, Tag


class ProblemKind(StrEnum):
    """What is wrong with a row, an event or a numbering (values are stable: JSON output)."""

    MISSING = "missing"
    ORPHANED = "orphaned"
    DUPLICATED = "duplicated"
    MISNUMBERED = "misnumbered"
    WRONG_BUCKET = "wrong_bucket"
    GAP = "gap"


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """One problem: a row (or, for `missing`, an event; for `gap`, a run of missing numbers).

    `tag_pid_sequence_nr` is the row's number (for `missing` the expected one, for `gap` the
    first missing one, `count` numbers long); `time_bucket` is the row's bucket (epoch millis
    of its start; ISO-8601 in UTC in the JSON and the text, as every instant ordo prints).
    """

    kind: ProblemKind
    tag: Tag
    persistence_id: PersistenceId
    sequence_nr: int | None
    tag_pid_sequence_nr: int
    expected_tag_pid_sequence_nr: int | None = None
    time_bucket: int | None = None
    expected_time_bucket: int | None = None
    count: int = 1

    def describe(self) -> str:
        """One human line."""
        where = f"tag={self.tag!r} persistence_id={self.persistence_id!r}"
        if self.kind is ProblemKind.GAP:
            last = self.tag_pid_sequence_nr + self.count - 1
            return f"gap: {where} tag_pid_sequence_nr {self.tag_pid_sequence_nr}..{last} absent"
        text = f"{self.kind.value}: {where} sequence_nr={self.sequence_nr}"
        text += f" tag_pid_sequence_nr={self.tag_pid_sequence_nr}"
        if self.kind is ProblemKind.MISNUMBERED:
            text += f" (expected {self.expected_tag_pid_sequence_nr})"
        if self.kind is ProblemKind.WRONG_BUCKET:
            text += f" in bucket {_shown(self.time_bucket)}"
            text += f" (expected {_shown(self.expected_time_bucket)})"
        return text

    def to_json_dict(self) -> dict[str, Any]:
        """The problem as one JSON object."""
        return {
            "kind": self.kind.value,
            "tag": self.tag,
            "persistence_id": self.persistence_id,
            "sequence_nr": self.sequence_nr,
            "tag_pid_sequence_nr": self.tag_pid_sequence_nr,
            "expected_tag_pid_sequence_nr": self.expected_tag_pid_sequence_nr,
            "time_bucket": _shown(self.time_bucket),
            "expected_time_bucket": _shown(self.expected_time_bucket),
            "count": self.count,
        }


def _shown(time_bucket: int | None) -> str | None:
    """A bucket (epoch millis of its start) as the report shows it: ISO-8601 in UTC, or None."""
    return None if time_bucket is None else format_epoch_ms(time_bucket)


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyReport:
    """Journal vs tag views. `problems` holds up to `sample_limit` of each kind; `counts` all.

    `affected` is every (tag, persistence id) with any problem: what a repair rebuilds.
    """

    tagged_events: int
    tag_view_rows: int
    retained_rows: int
    counts: Mapping[ProblemKind, int]
    problems: tuple[Problem, ...]
    affected: tuple[tuple[Tag, PersistenceId], ...]
    sample_limit: int

    @property
    def is_clean(self) -> bool:
        """Whether every tagged event has exactly its one right row, and nothing else exists."""
        return not any(self.counts.values())

    def of_kind(self, kind: ProblemKind) -> tuple[Problem, ...]:
        """The (sampled) problems of one kind."""
        return tuple(p for p in self.problems if p.kind is kind)

    def describe_lines(self) -> list[str]:
        """The human report: a summary line, counts, then the sampled problems."""
        verdict = "clean" if self.is_clean else "PROBLEMS FOUND"
        lines = [
            f"tag views {verdict}: {self.tagged_events} tagged events, {self.tag_view_rows} "
            f"tag_views rows ({self.retained_rows} kept for deleted events)"
        ]
        for kind in ProblemKind:
            if self.counts.get(kind):
                lines.append(f"  {kind.value}: {self.counts[kind]}")
        lines.extend(f"  {p.describe()}" for p in self.problems)
        shown = sum(1 for _ in self.problems)
        total = sum(self.counts.values())
        if shown < total:
            lines.append(f"  ... {total - shown} more (first {self.sample_limit} of each kind)")
        return lines

    def to_json_dict(self) -> dict[str, Any]:
        """The report as one JSON document."""
        return {
            "clean": self.is_clean,
            "tagged_events": self.tagged_events,
            "tag_view_rows": self.tag_view_rows,
            "retained_rows": self.retained_rows,
            "counts": {kind.value: self.counts.get(kind, 0) for kind in ProblemKind},
            "problems": [p.to_json_dict() for p in self.problems],
            "affected": [{"tag": t, "persistence_id": p} for t, p in self.affected],
        }
