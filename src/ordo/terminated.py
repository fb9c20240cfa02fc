"""How a stop by SIGTERM reaches a command's Ctrl-C path, shared by the CLI and its Spark work.

The command line (`ordo.cli.termination`) and `ordo.spark.interruption` both raise it; the
library may not import the command line, so it lives here.
"""

from __future__ import annotations

__all__ = ["Terminated"]


class Terminated(KeyboardInterrupt):
    """A stop by SIGTERM: a KeyboardInterrupt, so every Ctrl-C path handles it (status 143)."""
