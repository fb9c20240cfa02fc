"""Errors of values a caller passed that ordo rejects before changing anything."""

from __future__ import annotations

from ordo.errors.root import OrdoError


class InvalidInputError(OrdoError, ValueError):
    """A caller passed a value ordo rejects; nothing was changed."""


class InvalidIdentifierError(InvalidInputError):
    """A persistence id or tag is empty, too long or contains a NUL character."""


class InvalidSequenceNrError(InvalidInputError):
    """A sequence number is out of range (they start at 1; expected ones at 0)."""


class SerializationError(InvalidInputError):
    """A payload or metadata value cannot be serialized (not bytes and not JSON)."""


class OffsetFormatError(InvalidInputError):
    """A value is not a valid TimeUUID or offset."""


class FutureOffsetError(InvalidInputError):
    """A query was asked to start after now: nothing there can have been delivered."""


class InvalidSegmentOperationError(InvalidInputError):
    """A segment, segment id or segment count that Axon's rules forbid.

    Merging segments that are not siblings, splitting one whose mask already uses every bit of
    the hash, a set of ids no splits make, a count or id that is no int. A subclass of
    InvalidInputError (and so of OrdoError and ValueError): the token store refuses a segment
    id that is no int as InvalidInputError, and one `except InvalidInputError` catches both.
    """
