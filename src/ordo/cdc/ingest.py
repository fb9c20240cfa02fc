"""The ingestion path: raw mutations from any producer, published like captured changes.

This is how a Cassandra CDC agent or the replica simulation feeds the pipeline: mutations in the
documented JSON format (`ordo.cdc.mutation_json`) are checked whole, then published. Every input
(every file of one `ordo cdc ingest`) is checked before any is published, so a bad line or a table
without a schema anywhere leaves the change log as it was. Then each input is published on its
own, in order: the change log is files, with no transaction across them. What fails part-way
(storage) leaves the inputs before it published, and running the same ingest again is safe: the
publisher skips the positions the log holds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

from ordo.cdc.change_rows import ChangeRows
from ordo.cdc.key_form import keyed_in_form
from ordo.cdc.mutation import Mutation
from ordo.cdc.mutation_json import line_location, parse_mutation_line
from ordo.cdc.ports import SchemaVersion
from ordo.cdc.publisher import Publisher, PublishReceipt
from ordo.cdc.schema_registry import SchemaRegistry
from ordo.documents import USER_TEXT_ENCODING
from ordo.errors import MalformedMutationError, UnknownSchemaError


@dataclass(frozen=True, slots=True, kw_only=True)
class MutationLines:
    """The mutations of one JSON lines input (a file, or stdin), each with its line number.

    The line numbers let errors found after parsing (a table without a schema) point at a line.
    """

    source: str
    mutations: tuple[tuple[int, Mutation], ...]


def parse_mutation_lines(source: str, data: bytes) -> MutationLines:
    """Every mutation of the JSON lines `data` read from `source` (blank lines skipped).

    MalformedMutationError names `source` and its first bad line (or says it is not UTF-8 text);
    then nothing of it is used. Lines end at a line feed only: `str.splitlines` would also split
    a JSON string holding U+2028 or another Unicode line break, which JSON allows unescaped.
    """
    try:
        text = data.decode(USER_TEXT_ENCODING)
    except UnicodeDecodeError as exc:
        msg = f"{source}: not a text file: {exc}"
        raise MalformedMutationError(msg) from exc
    return MutationLines(
        source=source,
        mutations=tuple(
            (number, parse_mutation_line(line, line_nr=number, source=source))
            for number, line in enumerate(text.split("\n"), start=1)
            if line.strip()
        ),
    )


def _current_versions(
    inputs: Sequence[MutationLines], registry: SchemaRegistry
) -> dict[str, SchemaVersion]:
    """Each table's current schema version, looked up once per table.

    UnknownSchemaError names the input and line of the first mutation of a table without one.
    """
    current: dict[str, SchemaVersion] = {}
    for lines in inputs:
        for number, mutation in lines.mutations:
            if mutation.table in current:
                continue
            try:
                current[mutation.table] = registry.current(mutation.table)
            except UnknownSchemaError as exc:
                msg = f"{line_location(number, lines.source)}: {exc}"
                raise UnknownSchemaError(msg) from exc
    return current


def ingest(
    inputs: Sequence[MutationLines], publisher: Publisher, registry: SchemaRegistry
) -> list[PublishReceipt]:
    """`prepare_ingest` the inputs, then publish each in turn; receipts in the order of `inputs`.

    An error publishing one leaves the inputs before it published (the change log has no
    transaction across inputs); publishing the same inputs again skips what the log holds,
    without `check_skipped` (`Publisher.publish_rows` says why).
    """
    return [
        publisher.publish_rows(rows, check_skipped=False)
        for rows in prepare_ingest(inputs, publisher, registry)
    ]


def prepare_ingest(
    inputs: Sequence[MutationLines], publisher: Publisher, registry: SchemaRegistry
) -> list[ChangeRows]:
    """Each input's change log rows, each mutation naming its schema; publishes nothing.

    Every table needs a registered schema, and all of them are looked up before anything of any
    input is published; so are their partition counts (PartitionCountMismatchError when the
    publisher's is not a table's) and the log's check of every segment (`Publisher.check`:
    one too long to name a file), and every input is encoded as change log rows, each key in
    the form its schema's key columns give it (`keyed_in_form`; a mutation naming a schema id
    the registry does not have keeps its key, and the materializer dead-letters it). Apart
    from `ingest`, so that a caller publishing the inputs one by one can say which went in.
    """
    current = _current_versions(inputs, registry)

    @cache
    def named(schema_id: int) -> SchemaVersion | None:
        """The version of `schema_id`, looked up once; None when the registry has none."""
        try:
            return registry.by_id(schema_id)
        except UnknownSchemaError:
            return None

    def schema_of(mutation: Mutation) -> SchemaVersion | None:
        """The version the mutation names (its table's current one if none), None if unknown."""
        if mutation.schema_id is None:
            return current[mutation.table]
        version = named(mutation.schema_id)
        return version if version is not None and version.table == mutation.table else None

    prepared = [_change_rows(lines, schema_of) for lines in inputs]
    for rows in prepared:
        publisher.check(rows)
    return prepared


def _in_form(mutation: Mutation, version: SchemaVersion | None) -> Mutation:
    """The mutation naming `version` (its own schema id if it names one), keyed in its forms."""
    if version is None:
        return mutation
    if mutation.schema_id is None:
        mutation = dataclasses.replace(mutation, schema_id=version.schema_id)
    return keyed_in_form(mutation, version.schema)


def _change_rows(
    lines: MutationLines, schema_of: Callable[[Mutation], SchemaVersion | None]
) -> ChangeRows:
    """The rows of one input, each mutation naming its schema (the table's current one if none).

    Built for every input before any is published: what only the change log's encoding refuses
    (a lone surrogate escape, a NUL in an audit segment) was found while publishing, after the
    inputs before it were published. MalformedMutationError names the input.
    """
    try:
        return ChangeRows.from_mutations([_in_form(m, schema_of(m)) for _, m in lines.mutations])
    except MalformedMutationError as exc:
        msg = f"{lines.source}: {exc}"
        raise MalformedMutationError(msg) from exc
