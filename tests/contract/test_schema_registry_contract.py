"""The schema registry on both backends: versions, compatibility, operator acceptance."""

from __future__ import annotations

import pytest

from ordo.cdc import Column, ColumnType, SchemaRegistry, TableSchema
from ordo.errors import IncompatibleSchemaError, UnknownSchemaError
from ordo.storage.stores import Stores

ID = Column(name="id", type=ColumnType.LONG, nullable=False)
NAME = Column(name="name", type=ColumnType.STRING)
NOTE = Column(name="note", type=ColumnType.STRING)


def _schema(*columns: Column) -> TableSchema:
    return TableSchema(table="users", columns=columns, partition_key=("id",))


def test_registering_the_same_schema_twice_keeps_one_version(stores: Stores) -> None:
    registry = SchemaRegistry(stores.schemas)
    first = registry.register(_schema(ID, NAME))
    assert registry.register(_schema(ID, NAME)) == first
    assert first.version == 1
    assert first.is_accepted
    assert registry.by_id(first.schema_id) == first


def test_a_nullable_column_is_accepted_at_once(stores: Stores) -> None:
    registry = SchemaRegistry(stores.schemas)
    registry.register(_schema(ID, NAME))
    second = registry.register(_schema(ID, NAME, NOTE))
    assert (second.version, second.is_accepted) == (2, True)
    assert registry.current("users") == second


def test_an_incompatible_change_blocks_the_table_until_accepted(stores: Stores) -> None:
    registry = SchemaRegistry(stores.schemas)
    first = registry.register(_schema(ID, NAME))
    with pytest.raises(IncompatibleSchemaError, match="column 'name' dropped") as raised:
        registry.register(_schema(ID))
    assert raised.value.version == 2
    assert registry.current("users") == first
    assert registry.history("users").retired == frozenset()  # the drop is still pending
    with pytest.raises(IncompatibleSchemaError):  # still blocked, whatever is registered
        registry.register(_schema(ID, NAME))
    accepted = registry.accept("users", 2)
    assert registry.history("users").retired == {"name"}
    assert accepted.is_accepted
    assert registry.register(_schema(ID)) == accepted
    assert [v.version for v in registry.versions("users")] == [1, 2]


def test_unknown_tables_versions_and_ids_are_reported(stores: Stores) -> None:
    registry = SchemaRegistry(stores.schemas)
    with pytest.raises(UnknownSchemaError):
        registry.current("nope")
    with pytest.raises(UnknownSchemaError):
        registry.by_id(999)
    registry.register(_schema(ID, NAME))
    with pytest.raises(UnknownSchemaError):
        registry.accept("users", 7)
    assert stores.schemas.tables() == ["users"]


def test_registering_returns_the_accepted_versions_oldest_first(stores: Stores) -> None:
    """What a capture names older changes with, from the one read that registering makes."""
    registry = SchemaRegistry(stores.schemas)
    (first,) = registry.register_accepted(_schema(ID, NAME))
    assert list(registry.register_accepted(_schema(ID, NAME))) == [first]
    second = registry.register_accepted(_schema(ID, NAME, NOTE))[-1]
    with pytest.raises(IncompatibleSchemaError):
        registry.register_accepted(_schema(ID, NOTE))
    third = registry.accept("users", 3)
    assert list(registry.register_accepted(_schema(ID, NOTE))) == [first, second, third]


def test_the_history_names_the_other_types_older_versions_gave_a_column(stores: Stores) -> None:
    """The types a materialized table may still hold a retyped column in, newest first."""
    registry = SchemaRegistry(stores.schemas)
    registry.register(_schema(ID, NAME, NOTE))
    for version, retyped in ((2, ColumnType.LONG), (3, ColumnType.BOOLEAN)):
        with pytest.raises(IncompatibleSchemaError):
            registry.register(_schema(ID, Column(name="name", type=retyped), NOTE))
        registry.accept("users", version)
    with pytest.raises(IncompatibleSchemaError):  # pending: the table never had its type
        registry.register(_schema(ID, Column(name="name", type=ColumnType.DOUBLE), NOTE))

    history = registry.history("users")

    assert history.current.version == 3
    assert history.former_types == {"name": (ColumnType.LONG, ColumnType.STRING)}
    assert history.retired == frozenset()


def test_the_history_leaves_out_the_columns_of_a_pending_version(stores: Stores) -> None:
    """A column only a pending version has is no retired one: a table column of that name
    (added by hand) must stay."""
    registry = SchemaRegistry(stores.schemas)
    registry.register(_schema(ID, NAME))
    required = Column(name="note", type=ColumnType.STRING, nullable=False)
    with pytest.raises(IncompatibleSchemaError):
        registry.register(_schema(ID, NAME, required))

    history = registry.history("users")

    assert (history.current.version, history.retired, history.former_types) == (1, frozenset(), {})


def test_the_history_names_the_older_versions_keyed_otherwise(stores: Stores) -> None:
    """Keyed by other columns (as many of them), or by a retyped key column; a version keyed
    as the current one again, and a pending version, are not."""
    registry = SchemaRegistry(stores.schemas)
    by_id = registry.register(_schema(ID, NAME))
    by_name = TableSchema(table="users", columns=(ID, NAME), partition_key=("name",))
    with pytest.raises(IncompatibleSchemaError):
        registry.register(by_name)
    by_name_id = registry.accept("users", 2).schema_id
    with pytest.raises(IncompatibleSchemaError):
        registry.register(_schema(ID, NAME, NOTE))
    again_by_id = registry.accept("users", 3)
    id_as_text = Column(name="id", type=ColumnType.STRING, nullable=False)
    with pytest.raises(IncompatibleSchemaError):  # pending: no message names it
        registry.register(_schema(id_as_text, NAME, NOTE))

    assert registry.history("users").old_key_ids == {by_name_id}

    registry.accept("users", 4)
    assert registry.history("users").old_key_ids == {
        by_id.schema_id,
        by_name_id,
        again_by_id.schema_id,
    }
