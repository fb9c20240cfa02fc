"""ordo on Spark: the events-by-tag source, projections and the CDC materializer.

Importing this package needs the `spark` extra (pyspark, pyarrow). Its names are imported on
first use: Spark starts a fresh Python process for each streaming query's source (which imports
`ordo.spark.events_by_tag_source`) and for each stateful query's planning (which imports the
materializer's `change_processor`), and each of them imports this package first; loading every
module of it (with pandas) there cost about half a second per query.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import TYPE_CHECKING

from ordo.lazy_names import lazy_names as _lazy_names

if TYPE_CHECKING:
    from ordo.spark.materializer import MaterializerSpec, materialize
    from ordo.spark.projection import ProjectionSpec, projection
    from ordo.spark.register import python_for_workers, register, start_session

_MODULES = {
    "MaterializerSpec": "ordo.spark.materializer",
    "materialize": "ordo.spark.materializer",
    "ProjectionSpec": "ordo.spark.projection",
    "projection": "ordo.spark.projection",
    "python_for_workers": "ordo.spark.register",
    "register": "ordo.spark.register",
    "start_session": "ordo.spark.register",
}
"""Where each public name lives."""

__all__ = [
    "MaterializerSpec",
    "ProjectionSpec",
    "materialize",
    "projection",
    "python_for_workers",
    "register",
    "start_session",
]


__getattr__ = _lazy_names(__name__, _MODULES)


_NAMED_LIKE_MODULE = frozenset(n for n, module in _MODULES.items() if module.endswith(f".{n}"))
"""Functions whose module has their name (`projection`, `register`)."""


class _Package(ModuleType):
    """The package, whose functions `projection` and `register` stay functions.

    Importing a submodule sets the package's attribute of its name to the submodule, after
    the submodule ran: `import ordo.spark.projection` would make `ordo.spark.projection` (and
    so `from ordo.spark import projection`) the module instead of the function. Eager imports
    of the functions used to come after and win.
    """

    def __setattr__(self, name: str, value: object) -> None:
        if name in _NAMED_LIKE_MODULE and isinstance(value, ModuleType):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
