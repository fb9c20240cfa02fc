"""ordo on Spark: the events-by-tag streaming source (`ordo_events_by_tag`).

Importing this package needs the `spark` extra (pyspark, pyarrow). The CDC materializer's names
are imported on first use: Spark starts a fresh Python process for each streaming query's
source, and that process imports `ordo.spark.events_by_tag_source`, hence this package; loading
the materializer (and pandas) there too cost about half a second per query.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ordo.spark.projection import ProjectionSpec, projection
from ordo.spark.register import python_for_workers, register, start_session

if TYPE_CHECKING:
    from ordo.spark.materializer import MaterializerSpec, materialize

__all__ = [
    "MaterializerSpec",
    "ProjectionSpec",
    "materialize",
    "projection",
    "python_for_workers",
    "register",
    "start_session",
]


def __getattr__(name: str) -> Any:
    """`MaterializerSpec` and `materialize`, imported when first asked for."""
    if name in ("MaterializerSpec", "materialize"):
        from ordo.spark import materializer

        return getattr(materializer, name)
    msg = f"module 'ordo.spark' has no attribute {name!r}"
    raise AttributeError(msg)
