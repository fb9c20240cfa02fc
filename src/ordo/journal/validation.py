"""Checks on identifiers and sequence numbers, run before anything is written."""

from __future__ import annotations

from collections.abc import Iterable

from ordo import arguments
from ordo.errors import (
    InvalidIdentifierError,
    InvalidInputError,
    InvalidSequenceNrError,
    OrdoError,
)
from ordo.types import PersistenceId, SequenceNr, Tag

MAX_IDENTIFIER_LENGTH = 255
"""Longest persistence id or tag, in characters (Akka's journals use the same bound)."""


def _identifier(kind: str, value: object) -> str:
    if not isinstance(value, str):
        msg = f"{kind} must be a string, got {type(value).__name__}"
        raise InvalidIdentifierError(msg)
    if not value:
        msg = f"{kind} must not be empty"
        raise InvalidIdentifierError(msg)
    if len(value) > MAX_IDENTIFIER_LENGTH:
        msg = f"{kind} is {len(value)} characters long, at most {MAX_IDENTIFIER_LENGTH} allowed"
        raise InvalidIdentifierError(msg)
    check_storable(kind, value, InvalidIdentifierError)
    return value


def check_storable(name: str, value: str, error: type[OrdoError]) -> None:
    """Both backends store UTF-8 without NUL: reject what one of them would refuse.

    Raises `error` naming `name` and the value; other stores of text (the CDC change log and
    sinks) call it with their own error class.
    """
    if "\x00" in value:
        msg = f"{name} {value!r} contains a NUL character"
        raise error(msg)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        msg = f"{name} {value!r} is not valid Unicode text: {exc.reason}"
        raise error(msg) from exc


def text(value: object, *, name: str) -> str:
    """Return `value` as storable text (any length, maybe empty) or raise InvalidInputError."""
    if not isinstance(value, str):
        msg = f"{name} must be a string, got {type(value).__name__}"
        raise InvalidInputError(msg)
    check_storable(name, value, InvalidInputError)
    return value


def persistence_id(value: object) -> PersistenceId:
    """Return `value` as a PersistenceId or raise InvalidIdentifierError."""
    return PersistenceId(_identifier("persistence_id", value))


def tag(value: object) -> Tag:
    """Return `value` as a Tag or raise InvalidIdentifierError."""
    return Tag(_identifier("tag", value))


def processor_name(value: object) -> str:
    """Return `value` as a processor name or raise InvalidIdentifierError.

    It keys the token store's rows, so it follows the rules of a tag.
    """
    return _identifier("processor name", value)


def owner_name(value: object, *, name: str = "owner") -> str:
    """Return `value` as the owner of a claim or raise InvalidIdentifierError naming `name`.

    It is stored next to the processor name and follows the same rules; an empty owner would
    pass for the "" that `TokenStore.reset` checks claims against, so it is refused too. A
    journal's writer_uuid, the owner of its writer lease, follows them as well.
    """
    return _identifier(name, value)


def tag_collection(value: object) -> Iterable[object]:
    """`value` when it is a collection of tags; InvalidInputError otherwise.

    A string is refused although it is iterable: its characters would each become a tag.
    """
    return arguments.collection(value, name="tags", error=InvalidInputError)


def sequence_nr(value: object, *, name: str, minimum: int = 1) -> SequenceNr:
    """Return `value` as a SequenceNr >= minimum or raise InvalidSequenceNrError naming `name`.

    Sequence nrs are stored as 64-bit integers.
    """
    return SequenceNr(
        arguments.integer(value, name=name, error=InvalidSequenceNrError, minimum=minimum)
    )


def integer(value: object, *, name: str, minimum: int = 0) -> int:
    """Return `value` as an int in minimum..2**63-1 or raise InvalidInputError naming `name`.

    For the numbers both backends store as 64-bit integers (segment ids, epoch milliseconds):
    beyond that SQLite raised OverflowError and PostgreSQL a StorageError.
    """
    return arguments.integer(value, name=name, error=InvalidInputError, minimum=minimum)
