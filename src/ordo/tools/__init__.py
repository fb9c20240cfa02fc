"""Operations on stored data: reconciliation, cleanup and TTL, verification (seed 000).

Open the stores with `ordo.storage.open.stores_at(url)`, then
`Reconciliation.of(stores)` or `Cleanup.of(stores)`. The Spark jobs (rebuilding everything,
`ordo verify`) are in `ordo.spark.rebuild` and `ordo.spark.verify`.
"""

from __future__ import annotations

from ordo.tools.cleanup import Cleanup, ExpiryReceipt, lagging_processors
from ordo.tools.guard import EVERY_PERSISTENCE_ID, WriterGuard
from ordo.tools.ports import DeletedCounts, OperationsStore, TagViewRow, WriterLeaseInfo
from ordo.tools.receipts import OperationReceipt
from ordo.tools.reconciliation import Reconciliation
from ordo.tools.verification import TagViewReport, check_tag_views, check_tag_views_of
from ordo.tools.verify_report import Problem, ProblemKind, VerifyReport

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
