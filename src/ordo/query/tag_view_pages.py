"""Reading one bucket of a tag view page by page, and the offset keys that bound such reads.

`TagQuery` reads rows by their sortable 16-byte offset keys (`after < key <= up_to`): these
helpers turn an instant into such a bound and a key back into its instant, and walk one bucket
a page at a time, as the query's gap searches and back-tracks do.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ordo.query.ports import R, TagViewPage, TagViewReader
from ordo.time import TimeUUID
from ordo.types import PersistenceId, Tag, TimeBucket


def key_at(epoch_ns: int) -> bytes:
    """The greatest key at `epoch_ns`: an upper bound that includes everything up to then."""
    return TimeUUID.max_for_epoch_ns(epoch_ns).to_bytes()


def key_ms(key: bytes) -> int:
    """The instant of an offset key, in epoch milliseconds."""
    return TimeUUID.from_bytes(key).epoch_ms


def read_pages(
    reader: TagViewReader[R],
    tag: Tag,
    bucket: TimeBucket,
    *,
    after: bytes,
    up_to: bytes,
    page: int,
    persistence_id: PersistenceId | None = None,
) -> Iterator[Sequence[R]]:
    """The bucket's rows with after < key <= up_to, a page of at most `page` rows at a time.

    Each page is read when the one before it has been consumed, and a short page is the last:
    a caller that stops early reads no further. The next page starts after the last row's
    offset, which no other row of the tag has (offsets are unique within a tag).
    """
    while True:
        rows = reader.read_tag_view(
            TagViewPage(
                tag=tag,
                time_bucket=bucket,
                after=after,
                up_to=up_to,
                limit=page,
                persistence_id=persistence_id,
            )
        )
        yield rows
        if len(rows) < page:
            return
        after = rows[-1].offset_key
