"""Stored CDC messages whose JSON was damaged (a row changed by hand or by another program).

Reading them back (`SqlChangeSink.read_messages`, what `open_stores(url).change_sink` offers a
library caller) is StorageIntegrityError naming the materializer, the message's batch and
ordinal and the column, as a damaged event is: no retry mends it. It was json's bare
JSONDecodeError, which named no row.
"""

from __future__ import annotations

import pytest

from cdc_support import apply_as_m, history_of, keyed_message, schema_of_t
from operations_support import execute
from ordo.cdc import ChangeOp, ColumnType
from ordo.errors import StorageIntegrityError
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
