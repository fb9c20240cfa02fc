"""A package's public names imported on first use (a module `__getattr__`, PEP 562).

Spark starts fresh Python processes that each import one module of ordo (a streaming source,
a stateful step's planning); importing a package imports its `__init__` first, and eager
imports of every public name there cost those processes up to half a second each.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_names(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """The `__getattr__` of `package`: a name of `modules` (name -> module) from its module."""

    def attribute(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            msg = f"module {package!r} has no attribute {name!r}"
            raise AttributeError(msg)
        return getattr(import_module(module), name)

    return attribute
