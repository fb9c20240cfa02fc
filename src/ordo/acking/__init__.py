"""Contiguous acking: commit positions for elements that complete out of order (seed 004)."""

from __future__ import annotations

from ordo.acking.contiguous_acker import ContiguousAcker
from ordo.acking.parallel import process_in_parallel

__all__ = [
    "ContiguousAcker",
    "process_in_parallel",
]
