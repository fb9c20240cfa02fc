"""Names with tabs, line breaks or other unprintable characters in the commands' text output.

A tag, persistence id, processor or table name may hold any character but NUL. Printed raw, a
tag with a tab read as two columns of `ordo tags` and one with a newline as two tags; the text
now quotes such a name as messages do (`tag 'a\\tb'`), and a plain name stays as it was.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cdc_cli_support import registered
from cli_support import run
from ordo.simulation.cdc import SIMULATED_SCHEMA
from ordo.storage.open import stores_at

_TAGS = ["'e'", "a\tb", "c\nd", "plain"]
"""Sorted as the tag views list them; `'e'` would read as the quoted name `e` if shown raw."""

_SHOWN = ["\"'e'\"", "'a\\tb'", "'c\\nd'", "plain"]


def _journal(runner: CliRunner, tmp_path: Path) -> str:
    """One event of persistence id `p<tab>q` with every tag of _TAGS."""
    url = f"sqlite:///{tmp_path / 'j.db'}"
    event = json.dumps({"persistence_id": "p\tq", "payload": 0, "tags": _TAGS})
    assert run(runner, "append", "--journal", url, stdin=event)[0] == 0
    return url


def _one_line(runner: CliRunner, *args: str) -> str:
    """The one line `ordo *args` prints, which succeeds."""
    code, out, err = run(runner, *args)
    assert code == 0, err
    (line,) = out.splitlines()
    return line


def test_tags_shows_each_tag_on_one_line_of_its_columns(runner: CliRunner, tmp_path: Path) -> None:
    code, out, _ = run(runner, "tags", "--journal", _journal(runner, tmp_path))
    assert code == 0
    assert [line.split("\t") for line in out.splitlines()] == [
        [shown, "1 event", "1 persistence id", "1 bucket"] for shown in _SHOWN
    ]


def test_reconcile_tags_shows_each_tag_on_one_line(runner: CliRunner, tmp_path: Path) -> None:
    url = _journal(runner, tmp_path)
    code, out, _ = run(runner, "reconcile", "tags", "--journal", url)
    assert (code, out.splitlines()) == (
        0,
        [f"{shown}  1 event  1 persistence id" for shown in _SHOWN],
    )
    code, out, _ = run(runner, "reconcile", "tags", "p\tq", "--journal", url)
    assert (code, out.splitlines()) == (0, _SHOWN)


def test_events_and_query_quote_the_names_in_an_events_line(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORDO_EVENTUAL_CONSISTENCY_DELAY_MS", "0")
    url = _journal(runner, tmp_path)
    tags = ",".join(f"{shown}#1" for shown in _SHOWN)
    assert _one_line(runner, "events", "p\tq", "--journal", url).endswith(f"  [{tags}]  0")
    assert _one_line(runner, "query", "c\nd", "--journal", url).endswith("  'p\\tq'#1  0")


def test_events_quotes_a_tag_holding_the_punctuation_of_its_tag_list(
    runner: CliRunner, tmp_path: Path
) -> None:
    """`[a#1,b#1]` was one tag `a#1,b` or two tags `a` and `b`: a tag with `,`, `#`, `[` or `]`
    is quoted in the list, as one that starts with a quote is."""
    url = f"sqlite:///{tmp_path / 'j.db'}"
    tags = ["a#1,b", "c]", "[d", "e"]
    event = json.dumps({"persistence_id": "p", "payload": 0, "tags": tags})
    assert run(runner, "append", "--journal", url, stdin=event)[0] == 0
    line = _one_line(runner, "events", "p", "--journal", url)
    assert line.endswith("  ['[d'#1,'a#1,b'#1,'c]'#1,e#1]  0")


def test_processors_status_quotes_a_processor_and_owner(runner: CliRunner, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    with stores_at(url) as stores:
        stores.tokens.initialize("p\nq", segment_count=1)
        stores.tokens.claim("p\nq", 0, "w\tx", now_ms=0, claim_timeout_ms=1)
    line = _one_line(runner, "processors", "status", "--journal", url)
    assert line.startswith("'p\\nq'  Segment[0/0]     owner='w\\tx'  claimed ")


def test_cdc_schemas_list_quotes_a_table_and_column(runner: CliRunner, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ordo.db'}"
    registered(tmp_path, url)
    document = json.loads(SIMULATED_SCHEMA.to_json())
    odd = {"name": "x\ny", "type": "string", "nullable": True}
    schema = tmp_path / "odd.json"
    schema.write_text(
        json.dumps({**document, "table": "r\ns", "columns": [*document["columns"], odd]})
    )
    assert run(runner, "cdc", "schemas", "register", str(schema), "--journal", url)[0] == 0
    code, out, _ = run(runner, "cdc", "schemas", "list", "--journal", url)
    assert code == 0
    assert [line.split(" ")[:2] for line in out.splitlines()] == [
        ["'r\\ns'", "v1"],
        ["readings", "v1"],
    ]
    assert out.splitlines()[0].endswith(", 'x\\ny' string")


def test_status_shows_names_as_they_are_not_as_console_markup(
    runner: CliRunner, tmp_path: Path
) -> None:
    """Rich read console markup and emoji codes in the tables' strings: a processor `[red]p`
    showed as a red `p`, a tag `:smile:` as an emoji, `[/x]` ended the command with rich's
    MarkupError, and a tag with a line break broke the journal table's row in two. The list of
    tags quotes one with a comma, as `events` does."""
    url = f"sqlite:///{tmp_path / 'j.db'}"
    tags = ["[/x]", ":smile:", "a\nb", "c,d"]
    event = json.dumps({"persistence_id": "p", "payload": 0, "tags": tags})
    assert run(runner, "append", "--journal", url, stdin=event)[0] == 0
    with stores_at(url) as stores:
        stores.tokens.initialize("[red]p", segment_count=1)
        now_ms = time.time_ns() // 1_000_000
        stores.tokens.claim("[red]p", 0, "w\tx", now_ms=now_ms, claim_timeout_ms=60_000)
    schema = tmp_path / "odd.json"
    schema.write_text(json.dumps({**json.loads(SIMULATED_SCHEMA.to_json()), "table": "[i]t"}))
    assert run(runner, "cdc", "schemas", "register", str(schema), "--journal", url)[0] == 0
    code, out, err = run(runner, "status", "--journal", url)
    assert code == 0, err
    lines = out.splitlines()
    assert "│ tags            │ :smile: (1), [/x] (1), 'a\\nb' (1), 'c,d' (1) │" in lines
    assert "│ [red]p    │ Segment[0/0] │ 'w\\tx' │" in out
    assert "│ schema │ [i]t │ v1 id=1 accepted │" in lines
