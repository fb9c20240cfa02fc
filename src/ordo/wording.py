"""How counts read in messages, notes and progress lines, from the errors to the command line."""

from __future__ import annotations


def counted(count: int, noun: str) -> str:
    """`count` with `noun` in the number it needs: "1 event", "2,000 persistence ids".

    A rebuild of one persistence id noted "1 persistence ids"; every message that counts
    says it this way.
    """
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"
