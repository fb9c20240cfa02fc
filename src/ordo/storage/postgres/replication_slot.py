"""The PostgreSQL capture's replication slot: its creation, reuse and drop, and where it stands.

`PostgresChangeSource` creates, checks and reads its wal2json slot through these queries, which
know the slot only by name and hold no capture state; `ordo status` lists every such slot.
"""

from __future__ import annotations

import re

import psycopg

from ordo.cdc.ports import SourceStatus
from ordo.errors import CaptureError, ConfigurationError, ReplicationSlotMissingError
from ordo.storage.postgres.capture_session import connect_capture, slot_missing
from ordo.storage.postgres.catalog import Connection
from ordo.storage.postgres.change_segment import SegmentReplica, capture_segment
from ordo.storage.postgres.datastore import translate_postgres_error
from ordo.storage.postgres.wal2json import parse_lsn

PLUGIN = "wal2json"
_SLOT_NAME = re.compile(r"[a-z0-9_]{1,63}")
_SLOT = (
    "SELECT confirmed_flush_lsn::text, wal_status = 'lost' "
    "FROM pg_replication_slots WHERE slot_name = %s"
)
_CAN_CREATE_SLOT = (
    "SELECT current_setting('wal_level'), "
    "current_setting('max_replication_slots')::int > (SELECT count(*) FROM pg_replication_slots), "
    "(SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user)"
)


def check_slot_name(slot: str) -> None:
    """ConfigurationError for a name PostgreSQL refuses for a slot, before anything is opened.

    At most 63 characters also keep the capture's segments short enough to name change log
    files (`ordo.storage.postgres.change_segment`).
    """
    if not _SLOT_NAME.fullmatch(slot):
        msg = f"slot must be 1-63 lower-case letters, digits or underscores, got {slot!r}"
        raise ConfigurationError(msg)


def check_slot(conn: Connection, slot: str) -> bool:
    """True when the slot exists and is ours to reuse; raise when it could not be created."""
    found = conn.execute(
        "SELECT plugin, slot_type, database = current_database() "
        "FROM pg_replication_slots WHERE slot_name = %s",
        (slot,),
    ).fetchone()
    if found is not None:
        if tuple(found) != (PLUGIN, "logical", True):
            msg = (
                f"replication slot {slot!r} exists but is not a {PLUGIN} slot of "
                f"this database (plugin={found[0]}, type={found[1]}): drop it or pick "
                "another slot name"
            )
            raise CaptureError(msg)
        return True
    refusal = _slot_refusal(conn)
    if refusal is not None:
        raise _cannot_create(slot, refusal)
    return False


def create_slot(conn: Connection, slot: str) -> None:
    """Create the logical slot with wal2json; CaptureError when the server lacks the plugin."""
    try:
        conn.execute("SELECT pg_create_logical_replication_slot(%s, %s)", (slot, PLUGIN))
    except (psycopg.errors.UndefinedFile, psycopg.errors.ObjectNotInPrerequisiteState) as e:
        reason = f"{e} (the server needs the wal2json plugin: postgresql-15-wal2json)"
        raise _cannot_create(slot, reason) from e


def drop_slot(conn: Connection, slot: str) -> None:
    """Drop the slot; nothing happens when it does not exist."""
    conn.execute(
        "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = %s",
        (slot,),
    )


def _cannot_create(slot: str, reason: str) -> CaptureError:
    """The error of a slot the server would not create, with what to do about it."""
    return CaptureError(f"cannot create replication slot {slot!r}: {reason}")


def _slot_refusal(conn: Connection) -> str | None:
    """Why the server would refuse to create a logical slot now, or None when it would not."""
    row = conn.execute(_CAN_CREATE_SLOT).fetchone()
    wal_level, free, allowed = row if row is not None else ("", False, False)
    if wal_level != "logical":
        return f"wal_level is {wal_level!r}, logical decoding needs 'logical'"
    if not free:
        return "every replication slot is taken (max_replication_slots)"
    if not allowed:
        return "the role has neither the REPLICATION nor the SUPERUSER attribute"
    return None


def confirmed_position(conn: Connection, slot: str) -> int:
    """The slot's confirmed position (confirmed_flush_lsn, inclusive): what was last advanced to.

    Every peek, advance and snapshot reads it first, so a slot the server invalidated is
    refused there (`_invalidated`) rather than failing the peek as an outage.
    """
    row = conn.execute(_SLOT, (slot,)).fetchone()
    if row is None or row[0] is None:
        raise slot_missing(slot)
    if row[1]:
        raise _invalidated(slot)
    return parse_lsn(str(row[0]))


def _invalidated(slot: str) -> CaptureError:
    """The error of a slot whose WAL the server removed (wal_status 'lost'): no retry mends it.

    PostgreSQL invalidates a slot that holds more WAL than `max_slot_wal_keep_size`; the
    changes in the removed WAL are gone. Its peek fails with SQLSTATE 55000, which reads as an
    outage (StorageUnavailableError): the capture retried it for the whole reconnect timeout,
    warning that PostgreSQL was unavailable, and then said so.
    """
    msg = (
        f"replication slot {slot!r} was invalidated: the server removed WAL it still needed "
        "(max_slot_wal_keep_size), so the changes in it are lost and nothing was advanced; "
        "drop the slot and capture the tables afresh with --snapshot"
    )
    return CaptureError(msg)


_POSITIONS = (
    "confirmed_flush_lsn::text, pg_current_wal_lsn()::text, "
    "pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint, wal_status = 'lost'"
)
"""Where a slot stands, as `_status` reads it: confirmed position, WAL head, WAL kept for it,
and whether the server invalidated it (its WAL is lost)."""
_STATUS = f"SELECT {_POSITIONS} FROM pg_replication_slots WHERE slot_name = %s"
_SLOTS = (
    f"SELECT slot_name, {_POSITIONS}, (SELECT system_identifier::text FROM pg_control_system()) "
    "FROM pg_replication_slots WHERE plugin = %s AND database = current_database() "
    "ORDER BY slot_name"
)


def slot_status(
    conn: Connection, slot: str, tables: tuple[str, ...], *, segment: str
) -> SourceStatus:
    """Where the slot stands, for a capture of `tables`; ReplicationSlotMissingError if gone.

    `segment` is what the capture publishes under (`PostgresChangeSource.name`).
    """
    row = conn.execute(_STATUS, (slot,)).fetchone()
    if row is None:
        raise _no_slot_to_show(slot)
    return _status(slot, segment, tables, *row)


def _no_slot_to_show(slot: str) -> ReplicationSlotMissingError:
    """The error of a status whose slot does not exist.

    Not `slot_missing`'s words, which are a capture's that lost its slot: a status advances
    nothing, and it may name a slot no capture ever created (a mistyped `--slot`, the default
    `ordo_cdc` for a capture that chose another), which there is nothing to create "again".
    """
    msg = (
        f"replication slot {slot!r} does not exist in this database: no capture created it, or "
        f"it was dropped; a capture with `--slot {slot}` creates it (after a drop, with "
        "--snapshot: the changes made without it are not captured)"
    )
    return ReplicationSlotMissingError(msg)


def capture_slots(dsn: str, published_by: SegmentReplica) -> list[SourceStatus]:
    """Every wal2json slot of the database at `dsn`: what `ordo status` shows of captures.

    Each with the segment a capture of it publishes under into the change log `published_by`
    looks at (the server's system identifier is read with the slots).
    """
    try:
        with connect_capture(dsn, autocommit=True) as conn:
            rows = conn.execute(_SLOTS, (PLUGIN,)).fetchall()
    except psycopg.Error as exc:
        raise translate_postgres_error(exc) from exc
    return [
        _status(str(name), capture_segment(str(name), str(replica), published_by), (), *positions)
        for name, *positions, replica in rows
    ]


def _status(
    slot: str,
    segment: str,
    tables: tuple[str, ...],
    confirmed: object,
    head: object,
    retained: object,
    lost: object,
) -> SourceStatus:
    """A slot's status from its `_POSITIONS` columns; a NULL position or size stays None."""
    return SourceStatus(
        name=slot,
        slot=slot,
        segment=segment,
        tables=tables,
        confirmed_position=None if confirmed is None else parse_lsn(str(confirmed)),
        head_position=parse_lsn(str(head)),
        retained_bytes=None if retained is None else int(str(retained)),
        invalidated=lost is True,
    )
