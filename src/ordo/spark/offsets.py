"""Offsets of the events-by-tag stream: small, versioned JSON in Spark's checkpoints.

A micro-batch reads `(start, end]`: the events the planner delivered, named by persistence id
and the tag pid sequence nrs of each (a contiguous range per id, by G1), inside the offset
range `lo..hi` where they lie. Naming them, not a time range, makes a replayed batch read
exactly the same rows even when late rows have arrived since. `position` is where the planner's
forward scan stood: a restarted query resumes after it. `tag` names the tag whose positions these
are, `processor` the processor the query runs for and `journal_id` the journal they are positions
in, so that a checkpoint reused by a query of another tag, processor or journal is refused
instead of resuming there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ordo.errors import CheckpointMismatchError, OffsetFormatError

OFFSET_VERSION = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class EventsByTagOffset:
    """The end of a micro-batch (and the start of the next). Keys are hex TimeUUID encodings."""

    position: str = ""
    """Resume after this key ("" = from the first time bucket); no other event of the tag has
    it (offsets are unique within a tag), so the key alone says where the scan stood."""
    lo: str = ""
    hi: str = ""
    pids: dict[str, list[int]] = field(default_factory=dict)
    """persistence id -> [first, last] tag pid sequence nr delivered in the batch ending here."""
    segments: list[list[int]] = field(default_factory=list)
    """[segment_id, mask] of the batch's input partitions, fixed when it was planned, so that a
    replay reads the same partitions even if segments were split or merged since."""
    tag: str | None = None
    """The tag read; None in offsets checkpointed before ordo recorded it (then any is accepted)."""
    processor: str | None = None
    """The query's processor (EventsByTagOptions.processor_name); None without one, or in
    offsets checkpointed before ordo recorded it."""
    journal_id: str | None = None
    """The id of the journal read (`JournalStore.journal_id`); None in offsets the planner did
    not make (a query's initial offset) or checkpointed before ordo recorded it."""

    def to_json_dict(self) -> dict[str, object]:
        """The checkpointed form."""
        return {
            "v": OFFSET_VERSION,
            "position": self.position,
            "lo": self.lo,
            "hi": self.hi,
            "pids": self.pids,
            "segments": self.segments,
            "tag": self.tag,
            "processor": self.processor,
            "journal_id": self.journal_id,
        }

    @classmethod
    def from_json_dict(cls, document: dict[str, object]) -> EventsByTagOffset:
        """Read a checkpointed offset; an incompatible version is an OffsetFormatError."""
        version = document.get("v")
        if version != OFFSET_VERSION:
            msg = (
                f"checkpointed events-by-tag offset has version {version!r}; this ordo reads "
                f"version {OFFSET_VERSION}: start the query with a new checkpoint"
            )
            raise OffsetFormatError(msg)
        try:
            pids, segments = document["pids"], document.get("segments", [])
            tag, processor = document.get("tag"), document.get("processor")
            journal_id = document.get("journal_id")
            assert tag is None or isinstance(tag, str)  # noqa: S101 - as below
            assert processor is None or isinstance(processor, str)  # noqa: S101 - as below
            assert journal_id is None or isinstance(journal_id, str)  # noqa: S101 - as below
            assert isinstance(pids, dict)  # noqa: S101 - turned into OffsetFormatError below
            assert isinstance(segments, list)  # noqa: S101 - turned into OffsetFormatError below
            return cls(
                position=str(document["position"]),
                lo=str(document["lo"]),
                hi=str(document["hi"]),
                pids={str(pid): [int(n) for n in span] for pid, span in pids.items()},
                segments=[[int(n) for n in pair] for pair in segments],
                tag=tag,
                processor=processor,
                journal_id=journal_id,
            )
        except (KeyError, TypeError, ValueError, AssertionError) as exc:
            msg = f"not an events-by-tag offset: {document!r}"
            raise OffsetFormatError(msg) from exc

    def check_query(self, tag: str, processor: str | None) -> None:
        """Refuse an offset checkpointed by a query of another tag or another processor.

        Called by the stream reader on every offset Spark hands back from a checkpoint: a
        checkpoint location reused for another tag would otherwise resume at the first tag's
        position and silently skip the new tag's events before it; reused by another
        processor (a projection renamed, or a second one given the first one's checkpoint),
        it would skip every event before that position, which the other processor has not
        applied. A query that starts or stops naming a processor may keep its checkpoint.
        """
        if self.tag is not None and self.tag != tag:
            raise CheckpointMismatchError(checkpointed=self.tag, requested=tag)
        if self.processor is not None and processor is not None and self.processor != processor:
            raise CheckpointMismatchError(
                checkpointed=self.processor, requested=processor, what="processor"
            )

    def check_journal(self, journal_id: str | None, *, url: str) -> None:
        """Refuse an offset planned on another journal than `journal_id`, that of `url`.

        A checkpoint location given another journal (of the same tag) would otherwise resume
        at the first journal's position and silently skip every event of this one before it.
        Either id unknown (an offset checkpointed before ordo recorded it, a journal of an
        older schema) passes: nothing tells the journals apart.
        """
        if self.journal_id is None or journal_id is None or self.journal_id == journal_id:
            return
        raise CheckpointMismatchError(
            checkpointed=self.journal_id,
            requested=journal_id,
            what="journal",
            evidence=f"the id of {url}",
        )
