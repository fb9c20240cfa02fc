"""Checks shared by every reader of hand-written documents: JSON lines, TOML files, options.

Optional keys are read with `.get`, so a misspelt one ("ttl" for "ttl_s") would otherwise be
dropped without a word and the document taken to say something it does not. Every reader
refuses unknown keys the same way, with the same message.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ordo.errors import OrdoError


def unknown_names_message(
    unknown: Sequence[str], valid: Iterable[str], *, where: str, noun: str = "key"
) -> str:
    """`<where> has unknown key(s) 'a', 'b' (valid keys: x, y)`, with `noun` for "key"."""
    plural = "s" if len(unknown) > 1 else ""
    return (
        f"{where} has unknown {noun}{plural} {', '.join(map(repr, unknown))} "
        f"(valid {noun}s: {', '.join(valid)})"
    )


def reject_unknown_keys(
    document: Iterable[str],
    valid: Sequence[str],
    *,
    where: str,
    error: type[OrdoError],
    noun: str = "key",
) -> None:
    """Raise `error` naming the keys of `document` that are not in `valid` (in document order)."""
    unknown = [key for key in document if key not in valid]
    if unknown:
        raise error(unknown_names_message(unknown, valid, where=where, noun=noun))
