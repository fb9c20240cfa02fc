"""Checks of what a TagQuery starts from, run once by its constructor and never by a poll.

TagQuery is public (`ordo.query`). Its callers in ordo pass checked values, but a wrong one
from elsewhere failed deep inside, as an AttributeError or TypeError naming no argument (a
reader of None on the first poll, settings of None in the constructor), or was taken as
given: a tag of None read nothing for ever, `is_live="no"` made a live query. Each value gets
the check it gets where ordo takes it elsewhere, so the error and its message are the same.
"""

from __future__ import annotations

from ordo import arguments
from ordo.errors import ConfigurationError, InvalidInputError, OffsetFormatError
from ordo.journal import validation
from ordo.query.offset import NoOffset
from ordo.query.ports import RunReader, TagViewReader
from ordo.settings import QuerySettings
from ordo.settings.loading import flag
from ordo.time import BucketSize, TimeUUID


def check_tag_query_arguments(
    reader: object,
    *,
    tag: object,
    offset: object,
    settings: object,
    bucket_size: object,
    first_time_bucket_ms: object,
    now_ns: object,
    is_live: object,
    runs: object,
    known: object,
    after_reset: object,
) -> None:
    """Raise the error of the first argument that is of no use, naming it.

    Parts (the readers, settings, bucket size), `is_live` and `after_reset` raise
    ConfigurationError; the tag InvalidIdentifierError; an offset other than NoOffset or a
    TimeUUID OffsetFormatError
    (`to_offset` reads texts and datetimes); the clock readings InvalidInputError; `known`
    InvalidInputError unless it is a mapping.
    """
    arguments.instance(reader, TagViewReader, name="reader", error=ConfigurationError)
    if runs is not None:
        arguments.instance(runs, RunReader, name="runs", error=ConfigurationError)
    validation.tag(tag)
    if not isinstance(offset, NoOffset | TimeUUID):
        msg = (
            "offset must be NoOffset or a TimeUUID (to_offset reads one from a text or a "
            f"datetime), got {type(offset).__name__}: {offset!r:.80}"
        )
        raise OffsetFormatError(msg)
    arguments.instance(settings, QuerySettings, name="settings", error=ConfigurationError)
    arguments.instance(bucket_size, BucketSize, name="bucket_size", error=ConfigurationError)
    arguments.integer(first_time_bucket_ms, name="first_time_bucket_ms", error=InvalidInputError)
    arguments.integer(now_ns, name="now_ns", error=InvalidInputError)
    flag("is_live", is_live)  # type: ignore[arg-type] # checking it is the point
    flag("after_reset", after_reset)  # type: ignore[arg-type]
    if known is not None:  # its entries are not looked at: a processor's may be millions
        arguments.mapping(known, name="known", error=InvalidInputError)
