"""The stable hash that places a persistence id (or any policy value) in a segment."""

from __future__ import annotations

from hashlib import blake2b

HASH_BITS = 32
"""Width of stable_hash(): segments may split until their mask has this many bits."""


def stable_hash(value: str) -> int:
    """Hash `value` to an unsigned 32-bit integer that is the same in every process and machine.

    Python's built-in hash() is salted per process, so it cannot decide which segment owns an
    event. BLAKE2b (standard library, no C extension to install) mixes every input bit into every
    output bit, so the low bits that segment masks select are evenly spread even for ids that
    differ in one character. The value is stored next to each tag_views row so that a segment can
    be selected in SQL with `persistence_id_hash & mask = segment_id`.
    """
    return int.from_bytes(blake2b(value.encode("utf-8"), digest_size=4).digest(), "big")
