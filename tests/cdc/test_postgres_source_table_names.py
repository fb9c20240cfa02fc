"""How a PostgreSQL capture reads the tables it is given: `table`, `schema.table`, and SQL's
quoted parts for a name holding a dot or a quote; the forms it refuses, and a table named twice.
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest

from ordo.errors import CaptureError, ConfigurationError
from ordo.storage.postgres.change_source import PostgresChangeSource
from ordo.storage.postgres.table_name import join_table_name, split_table_name
from postgres_source_support import Capture, summary


@pytest.mark.parametrize(
    ("given", "parts"),
    [
        ("orders", (None, "orders")),
        ("public.orders", ("public", "orders")),
        ("Orders", (None, "Orders")),  # taken as written, as ordo always took it
        ('"my.table"', (None, "my.table")),
        ('public."my.table"', ("public", "my.table")),
        ('"my.schema"."my.table"', ("my.schema", "my.table")),
        ('"say ""hi"""', (None, 'say "hi"')),
        ('"a"".b"."c"', ('a".b', "c")),
    ],
)
def test_table_names_split_into_schema_and_table(given: str, parts: tuple[str, str]) -> None:
    assert split_table_name(given) == parts
    schema, name = parts
    if schema is not None:
        assert split_table_name(join_table_name(schema, name)) == parts


@pytest.mark.parametrize(
    ("given", "refusal"),
    [
        ('"my.table', "has a double quote that does not open or close a whole name"),
        ('my"table', "has a double quote that does not open or close a whole name"),
        ('"my"table', "has a double quote that does not open or close a whole name"),
        ('public."a"b"', "has a double quote that does not open or close a whole name"),
        ("", "has an empty name"),
        ('""', "has an empty name"),
        (".orders", "has an empty name"),
        ("public.", "has an empty name"),
        ('public.""', "has an empty name"),
        ("db.public.orders", "has 3 dot-separated names: give table or schema.table"),
        ('a."b".c.d', "has 4 dot-separated names"),
    ],
)
def test_malformed_table_names_are_refused_before_anything_is_opened(
    given: str, refusal: str
) -> None:
    """Split at the last dot, they were looked up as another table, which "does not exist"."""
    with pytest.raises(ConfigurationError) as refused:
        PostgresChangeSource("postgresql://nowhere.invalid/db", slot="s", tables=[given])
    assert str(refused.value).startswith(f"table {given!r}")
    assert refusal in str(refused.value)


@pytest.mark.postgres
def test_a_table_whose_name_holds_a_dot_is_captured_by_its_quoted_name(
    run: Callable[..., None], capture: Capture, postgres_dsn: str
) -> None:
    """`my.table` is the table `table` in the schema `my`: the quoted forms name it."""
    qualified = f'{_current_schema(postgres_dsn)}."my.table"'
    run(
        'CREATE TABLE "my.table" (id int PRIMARY KEY, note text)',
        'CREATE TABLE "say ""hi""" (id int PRIMARY KEY)',
        """INSERT INTO "my.table" VALUES (1, 'a')""",
    )
    source = capture(qualified, '"say ""hi"""')
    snapshot = list(source.snapshot(qualified))
    run(
        """UPDATE "my.table" SET note = 'b'""",
        'INSERT INTO "say ""hi""" VALUES (7)',
        'DELETE FROM "my.table"',
    )

    assert [schema.table for schema in source.schemas()] == [qualified, '"say ""hi"""']
    assert summary([*snapshot, *source.peek(max_changes=20).mutations]) == [
        (qualified, (1,), "upsert", {"note": "a"}),
        (qualified, (1,), "upsert", {"note": "b"}),
        ('"say ""hi"""', (7,), "upsert", {}),
        (qualified, (1,), "delete", {}),
    ]
    [unqualified] = capture('"my.table"', create=False).schemas()
    assert unqualified.table == '"my.table"'


@pytest.mark.postgres
def test_two_names_of_one_table_are_refused(
    run: Callable[..., None], capture: Capture, postgres_dsn: str
) -> None:
    """Its changes were published under one of the names only, its snapshot under each."""
    run("CREATE TABLE orders (id int PRIMARY KEY)")
    qualified = f"{_current_schema(postgres_dsn)}.orders"
    source = capture("orders", qualified, create=False)
    with pytest.raises(CaptureError) as refused:
        source.create()
    assert str(refused.value) == f"tables 'orders' and {qualified!r} are one table: name it once"


@pytest.mark.postgres
def test_a_missing_table_is_named_as_it_would_be_given(capture: Capture, postgres_dsn: str) -> None:
    source = capture('"no.where"', create=False)
    with pytest.raises(CaptureError) as refused:
        source.schemas()
    assert str(refused.value).startswith(
        f"""captured table '"no.where"' ({_current_schema(postgres_dsn)}."no.where") does not """
        "exist"
    )


def _current_schema(dsn: str) -> str:
    """The schema a test's tables are created in (its DSN's search_path)."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT current_schema()").fetchone()
    assert row is not None
    return str(row[0])
