"""PostgreSQL types the capture reads through: enums are strings (their labels), in snapshots,
changes and keys, and a domain is its base type through any depth of domains.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from ordo.cdc.capture import Capture as CaptureRunner
from ordo.cdc.change import ChangeOp, mutation_problems
from ordo.cdc.column_type import ColumnType
from ordo.cdc.materializer import materialize_partition
from ordo.cdc.publisher import Publisher
from ordo.cdc.row_state import PartitionState
from ordo.cdc.schema import Column
from ordo.cdc.schema_catalog import ResolvedSchema
from ordo.cdc.schema_registry import SchemaRegistry
from ordo.errors import JsonKeyColumnError, UnmappableColumnTypeError
from ordo.storage.open import stores_at
from ordo.storage.parquet.change_log import ParquetChangeLog
from postgres_source_support import Capture, summary

pytestmark = pytest.mark.postgres


def test_enum_columns_key_and_value_are_their_labels_through_capture_and_materializer(
    run: Callable[..., None], capture: Capture, postgres_dsn: str, tmp_path: Path
) -> None:
    """Refused as unmappable before. A label added while capturing (ALTER TYPE ... ADD VALUE)
    is one more string: the registry keeps one schema version, and the materializer folds the
    changes into messages whose rows conform to it."""
    run(
        "CREATE TYPE kind AS ENUM ('card', 'cash')",
        "CREATE TYPE mood AS ENUM ('sad', 'ok')",
        "CREATE TABLE feelings (kind kind, id int, mood mood, PRIMARY KEY (kind, id))",
        "INSERT INTO feelings VALUES ('card', 1, 'sad')",
    )
    source = capture("feelings")
    log = ParquetChangeLog(tmp_path / "log")
    with stores_at(postgres_dsn) as stores:
        registry = SchemaRegistry(stores.schemas)
        runner = CaptureRunner(source, Publisher(log), registry)
        runner.publish_snapshot("feelings")
        run("UPDATE feelings SET mood = 'ok'")
        run("ALTER TYPE mood ADD VALUE 'glad' BEFORE 'ok'")
        run("ALTER TYPE kind ADD VALUE 'coin'")
        run("INSERT INTO feelings VALUES ('coin', 2, 'glad')", "DELETE FROM feelings WHERE id = 1")
        totals = runner.run(until_idle=True)
        [version] = registry.versions("feelings")

    assert totals.published == {"feelings": 3}
    assert version.schema.columns == (
        Column(name="kind", type=ColumnType.STRING, nullable=False),
        Column(name="id", type=ColumnType.LONG, nullable=False),
        Column(name="mood", type=ColumnType.STRING, nullable=True),
    )
    logged = sorted(log.read("feelings"), key=lambda m: (not m.audit.is_snapshot, m.audit.position))
    assert summary(logged) == [
        ("feelings", ("card", 1), "upsert", {"mood": "sad"}),
        ("feelings", ("card", 1), "upsert", {"mood": "ok"}),
        ("feelings", ("coin", 2), "upsert", {"mood": "glad"}),
        ("feelings", ("card", 1), "delete", {}),
    ]
    assert [mutation_problems(m, version.schema) for m in logged] == [[]] * 4
    folds = {
        key: materialize_partition(
            PartitionState(),
            [m for m in logged if m.partition_key == key],
            lambda _: ResolvedSchema(schema_id=version.schema_id, schema=version.schema),
        )
        for key in (("card", 1), ("coin", 2))
    }
    assert [(m.op, m.after) for m in folds[("card", 1)].messages] == [
        (ChangeOp.READ, {"kind": "card", "id": 1, "mood": "sad"}),
        (ChangeOp.UPDATE, {"kind": "card", "id": 1, "mood": "ok"}),
        (ChangeOp.DELETE, None),
    ]
    assert [(m.op, m.after) for m in folds[("coin", 2)].messages] == [
        (ChangeOp.CREATE, {"kind": "coin", "id": 2, "mood": "glad"})
    ]


def test_a_domain_over_a_domain_is_its_base_type_in_snapshots_and_changes(
    run: Callable[..., None], capture: Capture
) -> None:
    """Only one level of domain was resolved: a domain over a domain was refused as unmappable."""
    run(
        "CREATE DOMAIN code AS text",
        "CREATE DOMAIN short_code AS code CHECK (length(VALUE) < 9)",
        "CREATE DOMAIN sku AS short_code",
        "CREATE DOMAIN positive AS int8 CHECK (VALUE > 0)",
        "CREATE DOMAIN line_nr AS positive",
        "CREATE TYPE color AS ENUM ('red', 'blue')",
        "CREATE DOMAIN paint AS color",
        "CREATE DOMAIN trim_paint AS paint",
        "CREATE TABLE items (sku sku, nr line_nr, color trim_paint, PRIMARY KEY (sku, nr))",
        "INSERT INTO items VALUES ('a-1', 1, 'red')",
    )
    source = capture("items")
    snapshot = list(source.snapshot("items"))
    run("UPDATE items SET color = 'blue'")

    [schema] = source.schemas()
    assert schema.columns == (
        Column(name="sku", type=ColumnType.STRING, nullable=False),
        Column(name="nr", type=ColumnType.LONG, nullable=False),
        Column(name="color", type=ColumnType.STRING, nullable=True),
    )
    assert summary([*snapshot, *source.peek(max_changes=10).mutations]) == [
        ("items", ("a-1", 1), "upsert", {"color": "red"}),
        ("items", ("a-1", 1), "upsert", {"color": "blue"}),
    ]


def test_a_domain_over_a_domain_gets_the_checks_of_its_base_type(
    run: Callable[..., None], capture: Capture
) -> None:
    run(
        "CREATE DOMAIN spot AS point",
        "CREATE DOMAIN place AS spot",
        "CREATE TABLE places (id int PRIMARY KEY, at place)",
        "CREATE DOMAIN doc AS jsonb",
        "CREATE DOMAIN body AS doc",
        "CREATE TABLE docs (k body PRIMARY KEY)",
    )
    with pytest.raises(UnmappableColumnTypeError, match="'places' column 'at' has type 'place'"):
        capture("places", create=False).schemas()
    with pytest.raises(JsonKeyColumnError, match="key column 'k' holds JSON"):
        capture("docs", create=False).schemas()

    run("CREATE TYPE mood AS ENUM ('sad')", "CREATE TABLE moods (id int PRIMARY KEY, m mood[])")
    with pytest.raises(UnmappableColumnTypeError, match=r"'moods' column 'm' has type 'mood\[\]'"):
        capture("moods", create=False).schemas()


def test_a_type_that_is_no_base_type_is_not_mapped_by_its_name(
    run: Callable[..., None], capture: Capture, postgres_dsn: str
) -> None:
    """A composite type named `date` in the table's schema was captured as a date."""
    with psycopg.connect(postgres_dsn) as conn:
        row = conn.execute("SELECT current_schema()").fetchone()
    assert row is not None
    run(
        f"CREATE TYPE {row[0]}.date AS (day int)",
        f"CREATE DOMAIN day AS {row[0]}.date",
        f"CREATE TABLE days (id int PRIMARY KEY, d {row[0]}.date, e day)",
    )
    with pytest.raises(UnmappableColumnTypeError, match="'days' column 'd' has type"):
        capture("days", create=False).schemas()
