"""The materializer's work for one partition key: check, order and fold its mutations.

Adapters (the Spark materializer) call `materialize_partition` once per partition key and
micro-batch with the key's stored `PartitionState` and the key's new mutations; what comes back
is the new state, the change messages in order, and the mutations that were rejected (dead
letters). Everything here is pure: the schema lookup is a function the caller passes in.

Initial snapshots: a capture publishes a table's current rows under a snapshot segment
(`snapshot_segment(...)`, so `Audit.is_snapshot`; the change log layout is fixed, so the mark
lives in the audit columns it already has). A snapshot mutation that brings a row into
existence is reported as `ChangeOp.READ` (a row of the snapshot) instead of `ChangeOp.CREATE`;
one that changes a known row is an ordinary UPDATE, and one that matches it emits nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ordo.cdc.change import ChangeMessage, ChangeOp, fold, mutation_problems
from ordo.cdc.mutation import Mutation
from ordo.cdc.row_state import PartitionState
from ordo.cdc.schema_catalog import ResolvedSchema
from ordo.errors import UnknownSchemaError

SchemaResolver = Callable[[int | None], ResolvedSchema]
"""Maps a mutation's schema id (None: the table's current accepted schema) to the version
messages name (e.g. `SchemaCatalog.resolve`); raises UnknownSchemaError when there is none."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RejectedMutation:
    """A mutation the materializer did not fold, and why (it goes to the dead letters)."""

    mutation: Mutation
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionFold:
    """What folding one partition key's mutations produced."""

    state: PartitionState
    messages: list[ChangeMessage]
    """In fold order: for each row, each message's `before` is the previous one's `after`."""
    rejected: list[RejectedMutation]


def delivery_order(mutation: Mutation) -> tuple[int, int, str, str]:
    """The order a key's mutations are folded in: snapshot rows, then position, segment, replica.

    Last write wins makes the final state independent of the order; the order decides which
    messages tell the story, so it must be deterministic across replays, and a snapshot's rows
    (READ) come before the changes captured after it, whose positions are not comparable with
    the snapshot's row ordinals.
    """
    audit = mutation.audit
    return (0 if audit.is_snapshot else 1, audit.position, audit.segment, audit.replica)


def _named(message: ChangeMessage, op: ChangeOp, schema_id: int) -> ChangeMessage:
    """The message with its op and schema id set (cheaper than dataclasses.replace)."""
    return ChangeMessage(
        table=message.table,
        op=op,
        key=message.key,
        before=message.before,
        after=message.after,
        schema_id=schema_id,
        write_time=message.write_time,
        audit=message.audit,
    )


def materialize_partition(
    state: PartitionState, mutations: Iterable[Mutation], resolve: SchemaResolver
) -> PartitionFold:
    """Fold `mutations` (one partition key, any order) into `state`.

    A mutation whose schema id `resolve` does not know, or that does not fit its schema
    (`mutation_problems`), is rejected and not folded; the others go on. Every message names
    the schema id it was built with, also when the mutation named none.
    """
    messages: list[ChangeMessage] = []
    rejected: list[RejectedMutation] = []
    for mutation in sorted(mutations, key=delivery_order):
        try:
            resolved = resolve(mutation.schema_id)
        except UnknownSchemaError as exc:
            rejected.append(RejectedMutation(mutation=mutation, reason=str(exc)))
            continue
        schema_id = resolved.schema_id
        problems = mutation_problems(mutation, resolved.schema)
        if problems:
            reason = f"does not fit schema id {schema_id}: {'; '.join(problems)}"
            rejected.append(RejectedMutation(mutation=mutation, reason=reason))
            continue
        state, changed = fold(
            state, mutation, resolved.schema, cells=resolved.cells, retyped=resolved.retyped
        )
        snapshot = mutation.audit.is_snapshot
        for message in changed:
            is_read = snapshot and message.op is ChangeOp.CREATE
            if is_read or message.schema_id != schema_id:
                message = _named(message, ChangeOp.READ if is_read else message.op, schema_id)
            messages.append(message)
    return PartitionFold(state=state, messages=messages, rejected=rejected)
