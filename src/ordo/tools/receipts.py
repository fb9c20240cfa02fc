"""What an operation did (or, in a dry run, would do): small values the CLI renders."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ordo.errors.operations import describe_leases
from ordo.tools.ports import DeletedCounts
from ordo.types import PersistenceId, Tag


@dataclass(frozen=True, slots=True, kw_only=True)
class OperationReceipt:
    """One reconciliation or cleanup operation's result.

    `deleted` counts rows deleted per table and `written_rows` the tag_views rows upserted;
    in a dry run both say what would happen and nothing was changed. `forced_past` names the
    live writers an operation with force=True went past (id -> writer uuids).
    """

    operation: str
    persistence_ids: tuple[PersistenceId, ...] = ()
    tags: tuple[Tag, ...] = ()
    deleted: DeletedCounts = field(default_factory=DeletedCounts)
    written_rows: int = 0
    is_dry_run: bool = False
    forced_past: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    note: str = ""
    """Why nothing happened (unknown ids or tags), or what to know about the result."""

    def after(self, first: OperationReceipt) -> OperationReceipt:
        """The receipt with what `first`, run before it in the same command, deleted.

        `ordo reconcile rebuild --all --truncate` reports the truncate's deletes and the
        rebuild's writes as one result.
        """
        return replace(
            self,
            deleted=first.deleted + self.deleted,
            forced_past={**first.forced_past, **self.forced_past},
        )

    @property
    def is_noop(self) -> bool:
        """Whether nothing was (or would be) deleted or written."""
        return self.deleted.total == 0 and self.written_rows == 0

    def describe(self) -> str:
        """One human line: what was done (deleted, wrote), or in a dry run what would be."""
        prefix = "dry run: would " if self.is_dry_run else ""
        if self.is_noop:
            return f"{self.operation}: nothing to do" + (f" ({self.note})" if self.note else "")
        parts = []
        d = self.deleted
        for count, what in (
            (d.events, "events"),
            (d.tag_view_rows, "tag_views rows"),
            (d.progress_rows, "tag_write_progress rows"),
            (d.scanning_rows, "tag_scanning rows"),
        ):
            if count:
                parts.append(f"{count} {what}")
        delete, write = ("delete", "write") if self.is_dry_run else ("deleted", "wrote")
        text = f"{self.operation}: {prefix}"
        if parts:
            text += f"{delete} " + ", ".join(parts)
        if self.written_rows:
            text += ("; " if parts else "") + f"{write} {self.written_rows} tag_views rows"
        if self.forced_past:
            text += f"; forced past live writers' {describe_leases(self.forced_past)}"
        return text + (f" ({self.note})" if self.note else "")

    def to_json_dict(self) -> dict[str, Any]:
        """The receipt as one JSON object (for --json)."""
        return {
            "operation": self.operation,
            "persistence_ids": list(self.persistence_ids),
            "tags": list(self.tags),
            "dry_run": self.is_dry_run,
            "nothing_to_do": self.is_noop,
            "deleted": {
                "events": self.deleted.events,
                "tag_view_rows": self.deleted.tag_view_rows,
                "progress_rows": self.deleted.progress_rows,
                "scanning_rows": self.deleted.scanning_rows,
            },
            "written_rows": self.written_rows,
            "forced_past": {pid: list(writers) for pid, writers in self.forced_past.items()},
            "note": self.note,
        }
