"""Stored CDC messages whose JSON was damaged (a row changed by hand or by another program).

Reading them back (`SqlChangeSink.read_messages`, what `open_stores(url).change_sink` offers a
library caller) is StorageIntegrityError naming the materializer, the message's batch and
ordinal and the column, as a damaged event is: no retry mends it. It was json's bare
JSONDecodeError, which named no row. So is a JSON value of a materialized table on SQLite, read
back by `read_table` or by a retype of its column.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cdc_support import apply_as_m, history_of, keyed_message, schema_of_t
from operations_support import execute
from ordo.cdc import ChangeOp, ColumnType
from ordo.errors import StorageIntegrityError
from ordo.storage.open import stores_at
from ordo.storage.sql_change_sink import SqlChangeSink
from ordo.storage.stores import Stores

SCHEMA = schema_of_t("v", of=ColumnType.STRING)
QUERY = "3f5e0d1c-0000-4000-8000-000000000002"


@pytest.mark.parametrize("column", ["key_json", "before_json", "after_json"])
def test_a_stored_message_that_is_not_json_is_named(
    stores: Stores, journal_url: str, column: str
) -> None:
    sink = stores.change_sink
    created = keyed_message("t", ChangeOp.CREATE, 1, None, {"id": 1, "v": "a"}, schema_id=1, at=1)
    updated = keyed_message(
        "t", ChangeOp.UPDATE, 1, {"id": 1, "v": "a"}, {"id": 1, "v": "b"}, schema_id=1, at=2
    )
    for batch_id, message in enumerate([created, updated]):
        apply_as_m(sink, batch_id, [message], history_of(SCHEMA), query_id=QUERY, target_table="c")
    execute(journal_url, f"UPDATE cdc_messages SET {column} = '{{oops' WHERE batch_id = 1")
    stored = execute(journal_url, "SELECT * FROM cdc_messages ORDER BY batch_id")
    with pytest.raises(StorageIntegrityError) as caught:
        list(sink.read_messages("m"))
    assert str(caught.value).startswith(
        f"the stored {column} of message 0 of batch 1 of materializer 'm' is not JSON: "
        "Expecting property name enclosed in double quotes"
    )
    assert isinstance(caught.value.__cause__, ValueError)
    assert execute(journal_url, "SELECT * FROM cdc_messages ORDER BY batch_id") == stored


JSON_DOC = schema_of_t("doc", of=ColumnType.JSON)


def _read_table(sink: SqlChangeSink) -> object:
    return sink.read_table("c", JSON_DOC)


def _retype_doc_to_a_long(sink: SqlChangeSink) -> object:
    """Batch 1, of a version that retypes `doc` to a long: the retype reads every value."""
    created = keyed_message("t", ChangeOp.CREATE, 8, None, {"id": 8, "doc": 1}, schema_id=2, at=2)
    retyped = history_of(schema_of_t("doc"), former_types={"doc": (ColumnType.JSON,)})
    return apply_as_m(sink, 1, [created], retyped, query_id=QUERY, target_table="c")


@pytest.mark.parametrize("reading", [_read_table, _retype_doc_to_a_long])
def test_a_json_value_of_a_materialized_table_that_is_not_json_is_named(
    tmp_path: Path, reading: Callable[[SqlChangeSink], object]
) -> None:
    """SQLite only: it stores a JSON column as text, which a hand edit can leave no JSON;
    PostgreSQL's jsonb refuses such text."""
    url = f"sqlite:///{tmp_path / 'sink.db'}"
    created = keyed_message("t", ChangeOp.CREATE, 7, None, {"id": 7, "doc": 1}, schema_id=1, at=1)
    with stores_at(url) as stores:
        sink = stores.change_sink
        apply_as_m(sink, 0, [created], history_of(JSON_DOC), query_id=QUERY, target_table="c")
        execute(url, "UPDATE c SET doc = '{oops'")
        with pytest.raises(StorageIntegrityError) as caught:
            reading(sink)
    assert str(caught.value).startswith(
        "the stored value of column 'doc' of the row keyed (7,) of table 'c' is not JSON: "
        "Expecting property name enclosed in double quotes"
    )
    assert isinstance(caught.value.__cause__, ValueError)
