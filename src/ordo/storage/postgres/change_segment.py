"""The segment a PostgreSQL capture's changes are published under: `<slot>.<system identifier>`.

The publisher skips the positions its change log already holds for a segment (`ordo.cdc.
publisher`), so two sources publishing under one segment lose changes: the second one's are
skipped as published, then confirmed at its slot. The segment was the slot's name, which two
servers capturing into one log shared when their slots were named alike (`ordo_cdc`, the
default). The server's system identifier (`pg_control_system()`, which any role may read; the
capture reads it in every session as its audits' `replica`) tells clusters apart and stays with
a cluster's standbys, whose WAL positions go on from the primary's after a failover.

A capture whose change log holds files of `<slot>` published from its server (an earlier ordo's)
goes on under `<slot>`: under a new name a capture restarted after a crash between publishing
and advancing would publish again what the log holds. Files of `<slot>` from another server are
not its own. The longest segment, a snapshot's (`<slot>.<identifier>.snapshot.<start µs>`, 63 +
1 + 20 + 10 + 16 characters), is well within what names a change log file.
"""

from __future__ import annotations

from collections.abc import Callable

SegmentReplica = Callable[[str], "str | None"]
"""The replica the change log's files of a segment were published from; None when it holds none."""


def no_change_log(_segment: str) -> None:
    """The `SegmentReplica` of a source given no change log to look at: it holds no segment."""


def capture_segment(slot: str, system_identifier: str, published_by: SegmentReplica) -> str:
    """`<slot>.<system identifier>`, or `<slot>` where the log holds its files from this server."""
    if published_by(slot) == system_identifier:
        return slot
    return f"{slot}.{system_identifier}"
