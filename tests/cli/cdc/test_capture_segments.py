"""`ordo cdc capture` from SQLite: each source file publishes under a segment of its own.

The publisher skips the positions its change log already holds for a segment, so two sources
sharing one would lose the second's changes: skipped as published, then forgotten at the
source. Two files of one name (`a/app.db`, `b/app.db`) used to share `sqlite:app.db`; a capture
now records its segment in the source file. A file captured before that record existed keeps
`sqlite:<file name>`, which its change log's positions are under.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

from cdc_cli_support import capture_orders, orders_by_segment, run_ordo
from ordo.storage.sqlite.change_source import SQLiteChangeSource


def _orders(path: Path, ids: range) -> Path:
    """An SQLite file at `path` with the table `orders` holding rows `ids` (made if missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, qty INTEGER)")
        conn.executemany("INSERT INTO orders VALUES (?, ?)", [(i, i) for i in ids])
    conn.close()
    return path


def _capture(source: Path, log: Path, journal: str) -> str:
    return capture_orders(log, journal, str(source))


def _segments(log: Path) -> dict[str, list[int]]:
    """Each segment of the orders log with the positions it holds, in order."""
    return orders_by_segment(log, lambda mutation: mutation.audit.position)


def test_two_sources_of_one_file_name_publish_every_change(tmp_path: Path, journal: str) -> None:
    first, second = (_orders(tmp_path / d / "app.db", range(0)) for d in ("a", "b"))
    log = tmp_path / "log"
    for source in (first, second):  # the first capture installs the triggers
        assert _capture(source, log, journal).startswith("published no changes")
        _orders(source, range(5))
    assert _capture(first, log, journal) == "published orders=5 (skipped 0 already in the log)"
    assert _capture(second, log, journal) == "published orders=5 (skipped 0 already in the log)"
    segments = _segments(log)
    assert list(segments.values()) == [[1, 2, 3, 4, 5]] * 2
    assert all(s.startswith("sqlite:app.db.") for s in segments)

    # each file keeps its segment: a later capture of it publishes under the same one
    _orders(first, range(10, 12))
    assert _capture(first, log, journal) == "published orders=2 (skipped 0 already in the log)"
    assert sorted(map(len, _segments(log).values())) == [5, 7]
    code, out, err = run_ordo(
        "cdc", "status", "--source", str(first), "--table", "orders", "--journal", journal, "--json"
    )
    assert code == 0, err
    (status,) = json.loads(out)["sources"]
    assert status["name"] in segments


def test_a_file_captured_before_segments_were_recorded_keeps_its_segment(
    tmp_path: Path, journal: str
) -> None:
    """After a crash between publish and advance under an earlier ordo, nothing is published twice.

    The earlier ordo's installation is this one without the segment record; the file copied
    before the capture and put back after it is the source as the crash left it (published,
    not advanced): the capture must recognise the log's positions as its own.
    """
    source = _orders(tmp_path / "app.db", range(0))
    with closing(SQLiteChangeSource(source, ["orders"])) as installed:
        installed.install()
    with sqlite3.connect(source) as conn:
        conn.execute("DROP TABLE IF EXISTS ordo_cdc_segment")
        conn.executemany("INSERT INTO orders VALUES (?, ?)", [(i, i) for i in range(5)])
    conn.close()
    unadvanced = shutil.copyfile(source, tmp_path / "unadvanced.db")
    log = tmp_path / "log"
    assert _capture(source, log, journal) == "published orders=5 (skipped 0 already in the log)"
    shutil.copyfile(unadvanced, source)
    assert _capture(source, log, journal) == "published no changes (skipped 5 already in the log)"
    assert _segments(log) == {"sqlite:app.db": [1, 2, 3, 4, 5]}
