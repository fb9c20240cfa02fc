"""The one bucket size of a journal: recorded with its first data, refused if another is asked."""

from __future__ import annotations

from ordo.errors import BucketSizeMismatchError


def check_bucket_size(recorded: str | None, requested: str) -> None:
    """Refuse a bucket size other than the one the journal records (None: none yet).

    Seed 001: it cannot change once data is written. Writers would split a tag across two
    layouts, and a reader with another size walks buckets that hold nothing (a wrong, empty
    answer, or minutes spent scanning minute buckets of an hourly journal).
    """
    if recorded is not None and recorded != requested:
        raise BucketSizeMismatchError(recorded=recorded, requested=requested)
