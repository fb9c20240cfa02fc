"""Operations on stored data: reconciliation, cleanup and TTL, verification (seed 000).

Open the stores with `ordo.storage.open.stores_at(url)`, then
`Reconciliation.of(stores)` or `Cleanup.of(stores)`. The Spark jobs (rebuilding everything,
`ordo verify`) are in `ordo.spark.rebuild` and `ordo.spark.verify`.

Its names are imported on first use: the journal's store imports `ordo.tools.ports`, and with
it every command that opened a journal loaded cleanup, reconciliation and verification (about
10 ms).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ordo.lazy_names import lazy_names as _lazy_names

if TYPE_CHECKING:
    from ordo.tools.cleanup import Cleanup, ExpiryReceipt, lagging_processors
    from ordo.tools.guard import EVERY_PERSISTENCE_ID, WriterGuard
    from ordo.tools.ports import DeletedCounts, OperationsStore, TagViewRow, WriterLeaseInfo
    from ordo.tools.receipts import OperationReceipt
    from ordo.tools.reconciliation import Reconciliation
    from ordo.tools.verification import TagViewReport, check_tag_views, check_tag_views_of
    from ordo.tools.verify_report import Problem, ProblemKind, VerifyReport

_MODULES = {
    **dict.fromkeys(("Cleanup", "ExpiryReceipt", "lagging_processors"), "ordo.tools.cleanup"),
    **dict.fromkeys(("EVERY_PERSISTENCE_ID", "WriterGuard"), "ordo.tools.guard"),
    **dict.fromkeys(
        ("DeletedCounts", "OperationsStore", "TagViewRow", "WriterLeaseInfo"), "ordo.tools.ports"
    ),
    "OperationReceipt": "ordo.tools.receipts",
    "Reconciliation": "ordo.tools.reconciliation",
    **dict.fromkeys(
        ("TagViewReport", "check_tag_views", "check_tag_views_of"), "ordo.tools.verification"
    ),
    **dict.fromkeys(("Problem", "ProblemKind", "VerifyReport"), "ordo.tools.verify_report"),
}
"""Where each public name lives."""

__all__ = [
    "EVERY_PERSISTENCE_ID",
    "Cleanup",
    "DeletedCounts",
    "ExpiryReceipt",
    "OperationReceipt",
    "OperationsStore",
    "Problem",
    "ProblemKind",
    "Reconciliation",
    "TagViewReport",
    "TagViewRow",
    "VerifyReport",
    "WriterGuard",
    "WriterLeaseInfo",
    "check_tag_views",
    "check_tag_views_of",
    "lagging_processors",
]


__getattr__ = _lazy_names(__name__, _MODULES)
