"""SQLite capture of text that is not UTF-8: SQLite stores whatever bytes an application binds or
casts as text, and a capture that could not read one such change stopped for good."""

from __future__ import annotations

import json
from pathlib import Path

from ordo.cdc.change import mutation_problems
from ordo.storage.sqlite.change_source import SQLiteChangeSource
from sqlite_support import run_sql


def test_text_that_is_not_utf8_is_captured_aside_and_dead_lettered(tmp_path: Path) -> None:
    """Python's driver cannot read such text as a string: the change row holding it failed every
    capture window (the changes after it waited for ever) and every snapshot. Like a BLOB in a
    text column, the value is captured aside as the bytes it holds (a key as null; a JSON
    column's document, JSON or not, too): the materializer dead-letters it naming the column."""
    path = tmp_path / "notes.db"
    run_sql(path, "CREATE TABLE notes (k TEXT PRIMARY KEY, title TEXT, body JSON)")
    source = SQLiteChangeSource(path, ["notes"])
    try:
        source.install()
        run_sql(
            path,
            "INSERT INTO notes VALUES ('a', CAST(x'ff41' AS TEXT), '{\"x\": \"ok\"}')",
            "INSERT INTO notes VALUES ('b', 'fine', CAST(x'7b2278223a22ff227d' AS TEXT))",
            "INSERT INTO notes VALUES (CAST(x'e9' AS TEXT), 'latin', NULL)",
            "UPDATE notes SET k = 'c' WHERE title = 'latin'",
            "INSERT INTO notes VALUES ('e', 'neither', CAST(x'7bff' AS TEXT))",
            "INSERT INTO notes VALUES ('d', 'after', NULL)",
        )
        (schema,) = source.schemas()
        window = source.peek(max_changes=100)
        snapshot = {m.partition_key: m for m in source.snapshot("notes")}
    finally:
        source.close()
    for text in window.rows.column("cell_values"):
        assert text is None or json.loads(text.encode())  # UTF-8, no lone surrogate
    title, body, bad_key, moved_from, moved_to, neither, after = window.rows.mutations()
    aside = "CAST(x'ff41' AS TEXT)"
    assert {n: c.value for n, c in title.cells.items()} == {
        "title (not JSON)": aside,
        "body": {"x": "ok"},
    }
    assert mutation_problems(title, schema) == [
        f"column 'title': {aside!r} is text that is not UTF-8, which a string column cannot hold"
    ]
    assert body.cells["body (not JSON)"].value == "CAST(x'7b2278223a22ff227d' AS TEXT)"
    assert mutation_problems(body, schema) == [
        "column 'body': \"CAST(x'7b2278223a22ff227d' AS TEXT)\" is text that is not UTF-8, "
        "which a json column cannot hold"
    ]
    assert bad_key.partition_key == (None,)
    assert mutation_problems(bad_key, schema) == ["key column 'k': None is not a string"]
    assert (moved_from.partition_key, moved_from.row_deleted_at) == ((None,), 4)
    assert moved_to.partition_key == ("c",)
    assert neither.cells["body (not JSON)"].value == "CAST(x'7bff' AS TEXT)"  # nor JSON
    assert (after.partition_key, after.cells["title"].value) == (("d",), "after")
    assert snapshot[("a",)].cells["title (not JSON)"].value == aside
    assert set(snapshot) == {("a",), ("b",), ("c",), ("d",), ("e",)}
