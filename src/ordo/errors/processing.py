"""Errors of processors: tracking tokens, projections, handlers and parallel processing."""

from __future__ import annotations

from ordo.errors.root import OrdoError


class ProjectionGapError(OrdoError):
    """A Spark projection was handed a persistence id's event past the next one it expects.

    The projection's positions say `applied` was the last tag pid sequence nr applied; the
    batch went on at `applied + 1 + len(missing)`. A query restarted after a
    MissingTaggedEventError takes the first event it meets after its checkpoint for an id's first,
    so it would skip the missing ones; the segment's batch is rolled back instead.
    """

    def __init__(
        self, *, processor: str, persistence_id: str, applied: int, missing: tuple[int, ...]
    ) -> None:
        self.processor, self.persistence_id = processor, persistence_id
        self.applied, self.missing = applied, missing
        shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
        msg = (
            f"projection {processor!r}: persistence_id={persistence_id!r} was applied up to "
            f"tag_pid_sequence_nr {applied}, the batch skips tag_pid_sequence_nrs [{shown}]; "
            "nothing of the segment's batch was applied (repair the tag views with "
            "`ordo verify --repair`, or go on past them with `ordo processors reset`, "
            "naming its own sink with --sink: see docs/spark.md)"
        )
        super().__init__(msg)


class TokenStoreError(OrdoError):
    """The token store refused an operation; nothing in it was changed."""


class UnknownProcessorError(TokenStoreError, LookupError):
    """No tokens exist for the processor (or segment) named."""


class UnknownSegmentError(UnknownProcessorError):
    """The processor has no segment of the id named, though it may have others.

    A split or merge since the id was read changes the ids. A subclass, so that callers
    catching UnknownProcessorError still catch it.
    """


class UnableToClaimTokenError(TokenStoreError):
    """Another owner holds the segment's claim and it has not expired."""


class PendingHandOverError(TokenStoreError):
    """A request would replace the hand-over that a merge of the segment waits for.

    The owner of a segment whose sibling another owner holds merges by asking that owner to
    hand the sibling over, through a request in the token store. A segment holds one request,
    so an operator's split, merge or release replaced the hand-over and held the merge up. It
    is refused instead: wait until the owner has handed the segment over (`ordo processors
    status` shows the pending request), or pass replace_hand_over=True
    (`--replace-hand-over`) to replace it anyway. `segment_id` and `target_owner` name the
    pending hand-over, `request` the refused request in an operator's words.
    """

    def __init__(
        self, *, processor: str, segment_id: int, target_owner: str | None, request: str
    ) -> None:
        self.processor, self.segment_id = processor, segment_id
        self.target_owner, self.request = target_owner, request
        msg = (
            f"processor {processor!r} segment {segment_id} is waiting for its owner to hand it "
            f"over to {target_owner!r} for a merge: a {request} request would replace that and "
            "hold the merge up (--replace-hand-over, or replace_hand_over=True, replaces it "
            "anyway)"
        )
        super().__init__(msg)


class PendingMergeError(TokenStoreError):
    """A hand-over was asked of a segment whose own owner is merging it with the asker's.

    Both owners of a pair of siblings merging it at once each asked the other to hand its
    segment over; each hand-over replaced the other's pending merge, so both handed their
    segment over and the pair swapped owners without merging. The lower segment's merge goes
    first: a hand-over of the lower segment is refused while its merge is pending (the owner
    asking for it leaves the merge and hands its own segment over when asked), and one of the
    higher segment replaces that segment's merge. `segment_id` names the segment asked for,
    `target_owner` the owner that asked.
    """

    def __init__(self, *, processor: str, segment_id: int, target_owner: str | None) -> None:
        self.processor, self.segment_id, self.target_owner = processor, segment_id, target_owner
        msg = (
            f"processor {processor!r} segment {segment_id} is being merged with its sibling by "
            f"its owner, whose merge goes first (the lower segment's): it will not hand the "
            f"segment over to {target_owner!r}"
        )
        super().__init__(msg)


class PendingRequestError(TokenStoreError):
    """A split or a requested release was refused: a request of another action is pending.

    It was asked of the segment as it is. A segment holds one request and the latest wins, so
    a request asked after the owner read a split or release replaced it (the receipt said so).
    A split would leave it on its lower half, which keeps the segment id, to be carried out
    there: a release of half the segment, a merge of the two halves back, a hand-over that no
    merge waits for any more. A release would carry out the request it replaced, and leave the
    new one to whoever claims the segment next. The owner keeps the segment and acts on the
    new request first. `segment_id` names the segment, `request` the pending request in an
    operator's words, `refused` the change refused ("split", "release").
    """

    def __init__(self, *, processor: str, segment_id: int, request: str, refused: str) -> None:
        self.processor, self.segment_id = processor, segment_id
        self.request, self.refused = request, refused
        msg = (
            f"processor {processor!r} segment {segment_id} has a {request} request pending, "
            f"asked of the segment as it is: it is acted on before any {refused}"
        )
        super().__init__(msg)


class PartialResetError(OrdoError):
    """A reset across a journal and a projection's sink reset only the journal's tokens.

    The two databases change in two transactions: the journal's committed, then the sink's
    reset failed (`cause`, also the exception's __cause__: a projection started after the
    check, or the sink's database became unreachable), so the sink's positions are as they
    were. Running the same reset again once the projection is stopped finishes it: the
    journal's tokens are reset again (what they replay is kept) and the sink's positions go.
    """

    def __init__(self, *, processor: str, cause: OrdoError) -> None:
        self.processor, self.cause = processor, cause
        msg = (
            f"processor {processor!r} was reset in the journal but not in the sink ({cause}): "
            "the journal's tokens are reset, the sink's positions are not; run the same reset "
            "again, with the projection stopped, to finish it"
        )
        super().__init__(msg)


class ElementFailedError(OrdoError):
    """A handler failed on an element of parallel processing.

    `offset` is the failed element's offset (its index in the input) and `committed` the last
    offset that may be committed: every element up to it (inclusive) was processed.
    """

    def __init__(self, *, offset: int, committed: int, cause: BaseException) -> None:
        self.offset, self.committed, self.cause = offset, committed, cause
        msg = (
            f"handler failed on element offset={offset}: {cause!r}; "
            f"last committable offset={committed}"
        )
        super().__init__(msg)


class ElementTimeoutError(ElementFailedError, TimeoutError):
    """A handler did not finish an element within the per-element timeout."""


class EventHandlingError(OrdoError):
    """A tracking processor's handler kept failing on an event and the error mode is `fail`.

    Also raised, whatever the error mode, when the processor's sequencing policy raised on the
    event (`cause`): the event belongs to no segment; and when the handler raised a
    BaseException that is no Exception (SystemExit, KeyboardInterrupt, GeneratorExit): it asks
    to end, not to retry or skip the event. The batch holding the event was rolled
    back, so nothing of it was applied; the processor stopped and its segments were released.
    """

    def __init__(
        self, *, processor: str, persistence_id: str, sequence_nr: int, cause: BaseException
    ) -> None:
        self.processor, self.persistence_id, self.sequence_nr = (
            processor,
            persistence_id,
            sequence_nr,
        )
        self.cause = cause
        msg = (
            f"processor {processor!r} failed on persistence_id={persistence_id!r} "
            f"sequence_nr={sequence_nr}: {cause!r}"
        )
        super().__init__(msg)
