"""The root of ordo's errors."""

from __future__ import annotations


class OrdoError(Exception):
    """Root of every error ordo raises: catch this to catch them all."""
