"""A command that gets a signal as it first imports a module: a stop at a known point of its start.

A signal sent from outside lands in a start of a few tenths of a second (or the seconds of a
Spark command's import of pyspark) only by chance, and a sleep before it races the start. The
command instead runs with `signalled_import/sitecustomize.py` on its PYTHONPATH, which Python
imports as the interpreter starts and which sends the signal as the module is first imported.
"""

from __future__ import annotations

import os
from pathlib import Path

FOLDER = Path(__file__).with_name("signalled_import")
"""The folder of the `sitecustomize` module."""


def signalled_at_import(name: str, module: str) -> dict[str, str]:
    """This process's environment for a command that gets the signal `name` (SIGINT, SIGTERM)
    as it first imports `module`, before any of the module's code runs."""
    path = [str(FOLDER), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(path),
        "SIGNALLED_IMPORT": f"{name} {module}",
    }
