"""Errors of the operations tools (reconciliation, cleanup, expiry) refusing to run."""

from __future__ import annotations

from collections.abc import Mapping

from ordo.errors.root import OrdoError


def describe_leases(writers: Mapping[str, tuple[str, ...]]) -> str:
    """The live leases `writers` maps (id -> writer uuids), as a refusal or a forced receipt says.

    Both name the writers, so that an operator can tell which processes to stop or check. `*`
    (every persistence id) is no id: it is shown as the writers alone. At most 5 ids are
    shown, then how many more.
    """
    if set(writers) == {"*"}:
        return f"leases (writer {', '.join(writers['*'])})"
    shown = ", ".join(
        f"{pid!r} (writer {', '.join(owners)})" for pid, owners in list(writers.items())[:5]
    )
    more = f" and {len(writers) - 5} more" if len(writers) > 5 else ""
    return f"leases on persistence_id {shown}{more}"


class OperationRefusedError(OrdoError):
    """An operations tool (reconciliation, cleanup, expiry) refused to run; nothing was changed."""


class ActiveWriterError(OperationRefusedError):
    """A live writer lease covers persistence ids the operation would change.

    `writers` maps each covered persistence id to the writers whose leases cover it (`*` when
    the operation touches every persistence id). Stop the writers, wait for their leases to
    expire, or pass force=True (`--force`) when they are known not to write these ids.
    """

    def __init__(self, *, operation: str, writers: dict[str, tuple[str, ...]]) -> None:
        self.operation, self.writers = operation, writers
        held = describe_leases(writers)
        if set(writers) == {"*"}:
            held += " and it changes every persistence id"
        msg = (
            f"{operation} refused: live writers hold {held}; stop them or pass --force (force=True)"
        )
        super().__init__(msg)


def _duration(milliseconds: int) -> str:
    """`milliseconds` in the largest unit it fills: "1.5 s", "2 h", "30 days".

    A TTL or a lag is hours or days long; as seconds it printed as "2.592e+06s".
    """
    for unit_ms, unit in ((86_400_000, "days"), (3_600_000, "h"), (60_000, "min")):
        if milliseconds >= unit_ms:
            amount = f"{milliseconds / unit_ms:,.1f}".removesuffix(".0")
            return f"{amount} {'day' if (amount, unit) == ('1', 'days') else unit}"
    return f"{milliseconds / 1000:g} s"


class TimeToLiveTooShortError(OperationRefusedError):
    """Deleting tag_views rows before a time would remove events a processor has not read.

    `lags` maps each such processor to its lag in milliseconds (None: it has read nothing yet,
    so it would read from the start). Seed 000: the TTL must be greater than any expected delay
    in using the tagged events.
    """

    def __init__(self, *, retention_ms: int, lags: dict[str, int | None]) -> None:
        self.retention_ms, self.lags = retention_ms, lags
        shown = ", ".join(
            f"{name!r} ({'nothing read yet' if lag is None else f'{_duration(lag)} behind'})"
            for name, lag in lags.items()
        )
        msg = (
            f"refused: keeping only the last {_duration(retention_ms)} of tag views would delete "
            f"events that processor(s) {shown} have not processed (--force, or force=True, "
            "deletes them anyway)"
        )
        super().__init__(msg)
