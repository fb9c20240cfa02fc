"""`ordo cdc schemas`: list, show, register and accept the versions of captured tables' schemas."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import click

from ordo.arguments import LARGEST_INTEGER
from ordo.cdc import SchemaRegistry, SchemaVersion, TableSchema
from ordo.cli.command_group import CommandGroup
from ordo.cli.integer_range import IntegerRange
from ordo.cli.number_arguments import NumberArgumentsCommand
from ordo.cli.options import (
    existing_journal,
    journal_option,
    json_option,
    non_empty,
    print_json,
    read_only_stores,
    require_journal,
)
from ordo.documents import USER_TEXT_ENCODING
from ordo.errors import InvalidSchemaError
from ordo.storage.open import stores_at
from ordo.wording import shown_name


def _document(version: SchemaVersion) -> dict[str, object]:
    return {
        "schema_id": version.schema_id,
        "table": version.table,
        "version": version.version,
        "accepted": version.is_accepted,
        "registered_at": version.registered_at.isoformat(),
        "schema": json.loads(version.schema.to_json()),
    }


def _line(version: SchemaVersion) -> str:
    state = "accepted" if version.is_accepted else "PENDING (run `ordo cdc schemas accept`)"
    columns = ", ".join(
        f"{shown_name(c.name)} {c.type.value}{'' if c.nullable else ' not null'}"
        for c in version.schema.columns
    )
    table = shown_name(version.table)
    return f"{table} v{version.version} id={version.schema_id} {state}: {columns}"


@click.group(cls=CommandGroup)
def schemas() -> None:
    """The schema registry: every message names the schema version it conforms to."""


@schemas.command("list")
@journal_option
@json_option
@click.argument("table", required=False, callback=non_empty)
def list_versions(journal_url: str | None, as_json: bool, table: str | None) -> None:
    """Show every version of TABLE's schema (or of every table)."""
    with read_only_stores(journal_url) as stores:
        known = list(stores.schemas.tables())
        tables = [table] if table else known
        versions = [v for name in tables for v in stores.schemas.versions(name)]
    if as_json:
        print_json([_document(v) for v in versions])
        return
    for version in versions:
        click.echo(_line(version))
    if not versions:
        click.echo(_none_registered(table, known), err=True)


def _none_registered(table: str | None, known: list[str]) -> str:
    """What `list` says when it finds no version: for a named table, which tables have some.

    "no schemas registered" for a misspelt table read as if the registry were empty.
    """
    if table is None:
        return "no schemas registered"
    others = f"tables with schemas: {', '.join(known)}" if known else "no table has one"
    return f"no schemas registered for table {table!r} ({others})"


@schemas.command()
@journal_option
@click.argument("schema_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def register(journal_url: str | None, schema_file: Path) -> None:
    """Declare a table's schema from SCHEMA_FILE (JSON: table, columns, partition_key, ...).

    This is how a source without a catalog (a Cassandra CDC agent, the ingestion path) gets a
    schema; captured PostgreSQL and SQLite tables register theirs from the catalog.
    """
    try:
        schema = TableSchema.from_json(schema_file.read_text(encoding=USER_TEXT_ENCODING))
    except UnicodeDecodeError as exc:
        msg = f"{schema_file}: not a text file: {exc}"
        raise InvalidSchemaError(msg) from exc
    with stores_at(require_journal(journal_url)) as stores:  # refuses a missing folder
        version = SchemaRegistry(stores.schemas).register(schema)
    click.echo(_line(version))


@schemas.command(cls=NumberArgumentsCommand)
@journal_option
@click.argument("table", callback=non_empty)
@click.argument("version", type=IntegerRange(min=1, max=LARGEST_INTEGER))
def accept(journal_url: str | None, table: str, version: int) -> None:
    """Accept VERSION of TABLE's schema after reviewing an incompatible change."""
    with stores_at(existing_journal(journal_url)) as stores:
        accepted = SchemaRegistry(stores.schemas).accept(table, version)
    click.echo(_line(dataclasses.replace(accepted, is_accepted=True)))
