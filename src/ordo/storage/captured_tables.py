"""The tables a capture is given, on either backend: two names of one table are refused."""

from __future__ import annotations

from collections.abc import Hashable, Iterable

from ordo.errors import CaptureError


def refuse_names_of_one_table(tables: Iterable[tuple[str, Hashable]]) -> None:
    """CaptureError for two given names whose identity (the second of each pair) is one table.

    A table named twice (`orders` and `ORDERS` on SQLite, which ignores the ASCII case of its
    names; `orders` and `public.orders` on PostgreSQL) was captured as two: each row snapshotted
    into the change log of each name, its changes published under one name only. Both catalogs
    refuse it here, with one message.
    """
    seen: dict[Hashable, str] = {}
    for given, identity in tables:
        if (first := seen.get(identity)) is not None:
            msg = f"tables {first!r} and {given!r} are one table: name it once"
            raise CaptureError(msg)
        seen[identity] = given
