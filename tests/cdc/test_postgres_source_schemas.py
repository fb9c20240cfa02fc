"""A PostgreSQL change source's table schemas: read from the catalog, the tables it refuses
(no primary key, a column type it cannot map, changes logical decoding would not deliver whole,
no such table), and columns that change while it captures.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import psycopg
import pytest

from ordo.cdc.capture import Capture as CaptureRunner
from ordo.cdc.capture import CaptureTotals
from ordo.cdc.change import mutation_problems
from ordo.cdc.column_type import ColumnType
from ordo.cdc.ports import SchemaVersion
from ordo.cdc.publisher import Publisher
from ordo.cdc.schema import Column
from ordo.cdc.schema_registry import SchemaRegistry
from ordo.errors import (
    CaptureError,
    IncompatibleSchemaError,
    JsonKeyColumnError,
    NoPrimaryKeyError,
    UnmappableColumnTypeError,
)
from ordo.storage.open import stores_at
from ordo.storage.parquet.change_log import ParquetChangeLog
from ordo.storage.postgres.change_source import PostgresChangeSource
from postgres_source_support import Capture, slot_count, summary

pytestmark = pytest.mark.postgres


def test_schemas_come_from_the_catalog(run: Callable[..., None], capture: Capture) -> None:
    run("CREATE TABLE lines (sku varchar(20), nr serial, qty int NOT NULL, PRIMARY KEY (nr, sku))")
    source = capture("lines", create=False)

    [schema] = source.schemas()

    assert schema.table == "lines"
    assert schema.columns == (
        Column(name="sku", type=ColumnType.STRING, nullable=False),
        Column(name="nr", type=ColumnType.LONG, nullable=False),
        Column(name="qty", type=ColumnType.LONG, nullable=False),
    )
    assert (schema.partition_key, schema.clustering_key) == (("nr", "sku"), ())


def test_a_table_without_primary_key_is_refused(run: Callable[..., None], capture: Capture) -> None:
    run("CREATE TABLE loose (id int)")
    source = capture("loose", create=False)
    with pytest.raises(NoPrimaryKeyError, match=r"'loose' has no primary key: .*ADD PRIMARY KEY"):
        source.schemas()


def test_a_table_without_primary_key_is_refused_for_it_before_its_column_types(
    run: Callable[..., None], capture: Capture
) -> None:
    """As on SQLite: the key is the first thing to fix."""
    run("CREATE TABLE spots (spot point)")
    source = capture("spots", create=False)
    with pytest.raises(NoPrimaryKeyError, match=r"'spots' has no primary key: .*ADD PRIMARY KEY"):
        source.schemas()


def test_an_unmappable_column_type_is_refused(run: Callable[..., None], capture: Capture) -> None:
    run("CREATE TABLE places (id int PRIMARY KEY, spot point)")
    source = capture("places", create=False)
    with pytest.raises(UnmappableColumnTypeError, match="'places' column 'spot' has type 'point'"):
        source.schemas()


def test_a_table_keyed_by_jsonb_is_refused_before_its_slot_is_created(
    run: Callable[..., None], capture: Capture, postgres_dsn: str
) -> None:
    """jsonb tells apart numbers a double cannot (`0.1` and `0.10000000000000000001` were both
    the key 0.1), and an object or array key stopped the capture at its first change."""
    run(
        "CREATE TABLE keyed (k jsonb PRIMARY KEY, n int)",
        """INSERT INTO keyed VALUES ('0.1', 1), ('0.10000000000000000001', 2), ('{"a": 1}', 3)""",
    )
    source = capture("keyed", create=False)
    with pytest.raises(JsonKeyColumnError) as refused:
        source.create()
    assert str(refused.value) == (
        "table 'keyed': key column 'k' holds JSON, which cannot key captured rows (CDC keys rows "
        "by the JSON text of scalar key values: JSON the source holds as two rows could be one "
        "key, and an object or array is no scalar); key the table by columns of other types to "
        "capture it"
    )
    assert slot_count(postgres_dsn, source.slot) == 0


@pytest.mark.parametrize(
    ("create", "refusal"),
    [
        (
            "CREATE UNLOGGED TABLE items (id int PRIMARY KEY, n int)",
            "is UNLOGGED: its writes reach no WAL, so no change of it is decoded; "
            "run ALTER TABLE {schema}.items SET LOGGED to capture it",
        ),
        (
            "CREATE TABLE items (id int PRIMARY KEY, n int); "
            "ALTER TABLE items REPLICA IDENTITY NOTHING",
            "has REPLICA IDENTITY NOTHING: wal2json skips its updates and deletes; "
            "run ALTER TABLE {schema}.items REPLICA IDENTITY DEFAULT to capture it",
        ),
        (
            "CREATE TABLE items (id int PRIMARY KEY, n int NOT NULL UNIQUE); "
            "ALTER TABLE items REPLICA IDENTITY USING INDEX items_n_key",
            "has a REPLICA IDENTITY index without key columns ['id']: its deletes and key "
            "updates would not name their rows; "
            "run ALTER TABLE {schema}.items REPLICA IDENTITY DEFAULT to capture it",
        ),
    ],
    ids=["unlogged", "identity nothing", "identity index without the key"],
)
def test_a_table_whose_changes_are_not_decoded_whole_is_refused_before_its_slot_is_created(
    run: Callable[..., None], capture: Capture, postgres_dsn: str, create: str, refusal: str
) -> None:
    """Captured, an UNLOGGED table's changes and the updates and deletes of one without a
    replica identity were lost without a word, and a delete logged without its key stopped
    the capture for good."""
    run(create)
    source = capture("items", create=False)
    with pytest.raises(CaptureError) as refused:
        source.create()
    assert str(refused.value) == f"table 'items' {refusal.format(schema=_schema(postgres_dsn))}"
    assert slot_count(postgres_dsn, source.slot) == 0


def test_a_replica_identity_index_holding_the_key_is_captured(
    run: Callable[..., None], capture: Capture
) -> None:
    run(
        "CREATE TABLE items (id int, n int NOT NULL, PRIMARY KEY (id))",
        "CREATE UNIQUE INDEX items_n_id ON items (n, id)",
        "ALTER TABLE items REPLICA IDENTITY USING INDEX items_n_id",
    )
    source = capture("items")
    run("INSERT INTO items VALUES (1, 10)", "UPDATE items SET id = 2", "DELETE FROM items")

    assert summary(source.peek(max_changes=20).mutations) == [
        ("items", (1,), "upsert", {"n": 10}),
        ("items", (1,), "delete", {}),
        ("items", (2,), "upsert", {"n": 10}),
        ("items", (2,), "delete", {}),
    ]


def test_a_table_losing_its_replica_identity_stops_the_capture_before_it_publishes(
    run: Callable[..., None], capture: Capture, postgres_dsn: str, tmp_path: Path
) -> None:
    """Checked at every window, not only when the slot is created: what the slot holds from
    before the change is published once the identity is given back."""
    run("CREATE TABLE items (id int PRIMARY KEY, n int)")
    source = capture("items")
    log = ParquetChangeLog(tmp_path / "log")
    run("INSERT INTO items VALUES (1, 10)", "ALTER TABLE items REPLICA IDENTITY NOTHING")
    with stores_at(postgres_dsn) as stores:
        runner = CaptureRunner(source, Publisher(log), SchemaRegistry(stores.schemas))
        with pytest.raises(CaptureError, match="'items' has REPLICA IDENTITY NOTHING"):
            runner.run(until_idle=True)
        assert list(log.read("items")) == []
        run("ALTER TABLE items REPLICA IDENTITY DEFAULT")
        totals = runner.run(until_idle=True)

    assert totals.published == {"items": 1}
    assert summary(list(log.read("items"))) == [("items", (1,), "upsert", {"n": 10})]


def _schema(dsn: str) -> str:
    """The schema a test's tables are created in (its DSN's search_path)."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT current_schema()").fetchone()
    assert row is not None
    return str(row[0])


def test_a_missing_table_is_a_capture_error(capture: Capture) -> None:
    source = capture("nowhere", create=False)
    with pytest.raises(CaptureError, match="'nowhere'"):
        source.schemas()


def test_a_column_added_while_capturing_is_captured(
    run: Callable[..., None], capture: Capture
) -> None:
    run("CREATE TABLE users (id int PRIMARY KEY)")
    source = capture("users")
    source.peek(max_changes=10)  # caches the schema
    run("ALTER TABLE users ADD COLUMN email text", "INSERT INTO users VALUES (1, 'a@b.c')")

    [insert] = source.peek(max_changes=10).mutations

    assert insert.cells["email"].value == "a@b.c"


def test_a_following_capture_goes_on_past_a_table_created_again_with_another_key(
    run: Callable[..., None], capture: Capture, postgres_dsn: str, tmp_path: Path
) -> None:
    """The old table's changes were all published before the drop: the source decoded the new
    table's first insert with the key it had read before (`id`), and the capture stopped there
    for good (`lacks key columns ['id']`), though a new capture run went on. The key change
    stops it for an operator, as any incompatible change does, and goes on once accepted."""
    run("CREATE TABLE t (id int PRIMARY KEY, v text)")
    source = capture("t")
    log = ParquetChangeLog(tmp_path / "log")
    with stores_at(postgres_dsn) as stores:
        registry = SchemaRegistry(stores.schemas)
        runner = CaptureRunner(source, Publisher(log), registry)
        run("INSERT INTO t VALUES (1, 'a')", "DELETE FROM t WHERE id = 1")
        assert runner.run(until_idle=True).published == {"t": 2}
        run(
            "DROP TABLE t",
            "CREATE TABLE t (uid int PRIMARY KEY, v text)",
            "INSERT INTO t VALUES (7, 'b')",
        )
        with pytest.raises(
            IncompatibleSchemaError, match=r"primary key changed from \('id',\) to \('uid',\)"
        ):
            runner.run(until_idle=True)
        registry.accept("t", 2)
        totals = runner.run(until_idle=True)
        first, second = registry.versions("t")

    assert totals.published == {"t": 1}
    logged = sorted(log.read("t"), key=lambda m: m.audit.position)
    assert summary(logged) == [
        ("t", (1,), "upsert", {"v": "a"}),
        ("t", (1,), "delete", {}),
        ("t", (7,), "upsert", {"v": "b"}),
    ]
    assert [m.schema_id for m in logged] == [first.schema_id] * 2 + [second.schema_id]
    assert second.schema.partition_key == ("uid",)


def _captured_across_incompatible_change(
    run: Callable[..., None],
    capture: Capture,
    postgres_dsn: str,
    log: ParquetChangeLog,
    columns: str,
    *transactions: Sequence[str],
    accept: int,
) -> tuple[CaptureTotals, Sequence[SchemaVersion], PostgresChangeSource]:
    """Capture a new `items (columns)`, run `transactions`, see the capture stop at the
    incompatible version they make, accept version `accept` and capture again.

    Returns the last run's totals, the table's versions and the source.
    """
    run(f"CREATE TABLE items ({columns})")
    source = capture("items")
    with stores_at(postgres_dsn) as stores:
        registry = SchemaRegistry(stores.schemas)
        runner = CaptureRunner(source, Publisher(log), registry)
        runner.run(until_idle=True)
        for statements in transactions:
            run(*statements)
        with pytest.raises(IncompatibleSchemaError):
            runner.run(until_idle=True)
        registry.accept("items", accept)
        return runner.run(until_idle=True), registry.versions("items"), source


@pytest.mark.parametrize(
    "alter",
    ["ALTER TABLE items DROP COLUMN note", "ALTER TABLE items ALTER COLUMN note TYPE int USING 0"],
)
def test_changes_made_before_an_accepted_incompatible_change_are_read_as_written(
    run: Callable[..., None], capture: Capture, postgres_dsn: str, tmp_path: Path, alter: str
) -> None:
    """The slot still holds them after the ALTER: read with the catalog's new types, the
    capture failed on every run and the slot kept its WAL for good."""
    log = ParquetChangeLog(tmp_path / "log")
    totals, (first, second), source = _captured_across_incompatible_change(
        run,
        capture,
        postgres_dsn,
        log,
        "id int PRIMARY KEY, note text, qty int",
        ["INSERT INTO items VALUES (1, 'cup', 2)", alter],
        ["INSERT INTO items (id, qty) VALUES (2, 3)"],
        accept=2,
    )

    assert totals.published == {"items": 2}
    logged = {m.partition_key: m for m in log.read("items")}
    assert logged[(1,)].cells["note"].value == "cup"
    assert (logged[(1,)].schema_id, logged[(2,)].schema_id) == (first.schema_id, second.schema_id)
    for version, key in ((first, (1,)), (second, (2,))):
        assert mutation_problems(logged[key], version.schema) == []
    assert source.peek(max_changes=10).mutations == []


def test_a_change_of_a_column_added_and_dropped_between_windows_names_a_version_it_fits(
    run: Callable[..., None], capture: Capture, postgres_dsn: str, tmp_path: Path
) -> None:
    """The catalog never showed the column to a capture: named with the version before the add,
    the change was dead-lettered for an unknown column, though wal2json gave its type. The
    drop stops the capture for an operator, as it does when a capture saw the column."""
    log = ParquetChangeLog(tmp_path / "log")
    _, versions, _ = _captured_across_incompatible_change(
        run,
        capture,
        postgres_dsn,
        log,
        "id int PRIMARY KEY, note text",
        [
            "ALTER TABLE items ADD COLUMN extra bigint",
            "INSERT INTO items VALUES (1, 'cup', 7)",
            "ALTER TABLE items DROP COLUMN extra",
        ],
        accept=3,
    )

    [logged] = log.read("items")
    [written] = [v for v in versions if v.schema_id == logged.schema_id]
    assert logged.cells["extra"].value == 7
    assert mutation_problems(logged, written.schema) == []
    assert (written, written.schema.by_name["extra"]) == (
        versions[1],
        Column(name="extra", type=ColumnType.LONG),
    )
