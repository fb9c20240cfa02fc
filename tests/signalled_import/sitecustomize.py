"""A signal to this very process as it first imports a module: a stop at a known point of a start.

Python's `site` imports this module as the interpreter starts when its folder is on PYTHONPATH
(`signalled_import_support` puts it on a command's). `SIGNALLED_IMPORT="SIGINT
ordo.cli.journal"` then sends SIGINT as `ordo.cli.journal` is first imported, before any of its
code runs: the handler the process has then runs right there (a signal sent from outside lands
in a start of a few tenths of a second only by chance). Without the variable it does nothing.
The variable is the test's, not ordo's: no ORDO_ prefix, and nothing in src/ reads it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import signal
import sys
from collections.abc import Sequence
from types import ModuleType

VARIABLE = "SIGNALLED_IMPORT"
"""Names the signal and the module: "SIGTERM ordo.cli.pipeline"."""


class _SignalledImport(importlib.abc.MetaPathFinder):
    """Sends `number` as `module` is first imported; finds nothing itself."""

    def __init__(self, number: signal.Signals, module: str) -> None:
        self.number = number
        self.module = module

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == self.module:
            sys.meta_path.remove(self)
            signal.raise_signal(self.number)  # its handler runs (or raises) here
        return None


if wanted := os.environ.get(VARIABLE):
    name, module = wanted.split()
    sys.meta_path.insert(0, _SignalledImport(signal.Signals[name], module))
