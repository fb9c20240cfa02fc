"""ordo on Spark: the events-by-tag streaming source (`ordo_events_by_tag`).

Importing this package needs the `spark` extra (pyspark, pyarrow).
"""

from __future__ import annotations

from ordo.spark.materializer import MaterializerSpec, materialize
from ordo.spark.projection import ProjectionSpec, projection
from ordo.spark.register import python_for_workers, register, start_session

__all__ = [
    "MaterializerSpec",
    "ProjectionSpec",
    "materialize",
    "projection",
    "python_for_workers",
    "register",
    "start_session",
]
