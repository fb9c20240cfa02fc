"""An option that names where reading starts: a TimeUUID or an ISO-8601 time with a zone."""

from __future__ import annotations

from uuid import UUID

from ordo.cli.options import aware_time
from ordo.errors import OffsetFormatError
from ordo.query.offset import Offset, to_offset

OFFSET_FORMS = "a TimeUUID or an ISO-8601 time with a zone"
"""What such an option takes, for its help text."""


def offset_argument(text: str | None, *, name: str) -> Offset:
    """The offset option `name` gives (None: from the beginning), checked before storage opens.

    `query --offset` and `processors reset --to` take the same forms, so that a user who reads
    from 10:00 can reset a processor to 10:00 (Axon's resetTokens(tokenAt(instant))) without
    computing a TimeUUID. A UUID must be a TimeUUID (to_offset says so); anything else is read
    as an ISO-8601 time with a zone, whose offset is the smallest TimeUUID at that instant:
    below every event written then, so reading resumes with them. A text that is neither is
    refused here, naming the option and what it takes, rather than as "not a UUID", or a time
    without a zone with the library's advice to pass an aware datetime.
    """
    if text is None:
        return to_offset(None)
    try:
        UUID(text)
    except ValueError:
        pass
    else:
        return to_offset(text)
    return to_offset(
        aware_time(
            text,
            name=name,
            unreadable="is neither a TimeUUID nor an ISO-8601 time",
            error=OffsetFormatError,
        )
    )
