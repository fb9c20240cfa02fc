"""ordo processors status and ordo status: tokens, merged parts, replays, requests."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli_support import run as _run
from ordo import NewEvent, open_journal
from ordo.processing import TrackingToken
from ordo.storage.open import stores_at
from ordo.time import TimeUUID
from ordo.tools.status import processor_status
from ordo.types import PersistenceId


def test_processors_status_shows_where_replays_end_after_a_reset(
    runner: CliRunner, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path}/p.db"
    processed = TimeUUID.min_for_epoch_ns(1_700_000_000_000_000_000)
    with stores_at(url) as stores:
        stores.tokens.initialize("counts", segment_count=1)
        stores.tokens.claim("counts", 0, "w", now_ms=0, claim_timeout_ms=1)
        with stores.tokens.batch("counts", 0, "w") as batch:
            batch.store_token(TrackingToken(processed))
        stores.tokens.release("counts", 0, "w")
    code, out, _ = _run(runner, "processors", "status", "--journal", url)
    assert code == 0
    assert "replays" not in out
    assert _run(runner, "processors", "reset", "counts", "--journal", url)[0] == 0

    code, out, _ = _run(runner, "processors", "status", "--journal", url)

    assert code == 0
    assert out.strip().endswith(f"token=start  replays until {processed}")

    with stores_at(url) as stores:  # the replay reaches the boundary: nothing is a replay now
        stores.tokens.claim("counts", 0, "w", now_ms=0, claim_timeout_ms=1)
        with stores.tokens.batch("counts", 0, "w") as batch:
            batch.store_token(TrackingToken(processed))
        stores.tokens.release("counts", 0, "w")
    code, out, _ = _run(runner, "processors", "status", "--journal", url)
    assert (code, "replays" in out) == (0, False)


def _sink_with_positions_only(tmp_path: Path) -> str:
    """A sink with a processor's tokens ('counts') and another's positions alone ('totals')."""
    sink = f"sqlite:///{tmp_path}/sink.db"
    with stores_at(sink) as stores:
        stores.tokens.initialize("counts", segment_count=1)
        with stores.tokens.batch("totals", 0, "spark") as batch:
            for persistence_id in ("order-1", "order-2"):
                batch.record(PersistenceId(persistence_id), 2)
    return sink


def test_processors_status_lists_a_projection_that_has_only_positions_in_its_sink(
    runner: CliRunner, tmp_path: Path
) -> None:
    """Status of a projection's own sink listed nothing: it has positions but no tokens."""
    sink = _sink_with_positions_only(tmp_path)

    code, out, _ = _run(runner, "processors", "status", "--journal", sink)

    assert code == 0
    assert out.splitlines() == [
        "counts  Segment[0/0]     owner=-  not claimed  token=start",
        "totals  no tokens  2 positions (a Spark projection's own sink: "
        "`processors reset --sink` clears them)",
    ]
    code, out, _ = _run(runner, "processors", "status", "totals", "--journal", sink, "--json")
    assert (code, json.loads(out)) == (
        0,
        [
            {
                "processor": "totals",
                "segment": None,
                "owner": None,
                "token": None,
                "ahead": [],
                "claim_age_ms": None,
                "claim_expired": None,
                "replay_until": None,
                "request": None,
                "request_age_ms": None,
                "positions": 2,
            }
        ],
    )
    code, out, _ = _run(runner, "processors", "status", "--journal", sink, "--json")
    assert [(row["processor"], row["positions"]) for row in json.loads(out)] == [
        ("counts", None),
        ("totals", 2),
    ]


def test_status_lists_a_projection_that_has_only_positions_in_its_sink(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ordo status` of a projection's own sink left it out, as `processors status` did."""
    sink = _sink_with_positions_only(tmp_path)
    log = tmp_path / "log"
    log.mkdir()
    status = ("status", "--journal", sink, "--change-log", str(log))

    code, out, _ = _run(runner, *status, "--json")

    assert code == 0
    processors = json.loads(out)["processors"]
    assert [(p["processor"], p["positions"]) for p in processors] == [
        ("counts", None),
        ("totals", 2),
    ]
    assert processors[1] == {
        "processor": "totals",
        "segments": [],
        "lag_events": None,
        "lag_ms": None,
        "positions": 2,
    }
    monkeypatch.setenv("COLUMNS", "200")  # the table's rows on one line each
    code, out, _ = _run(runner, *status)
    assert code == 0
    row = next(line for line in out.splitlines() if "totals" in line)
    assert [cell.strip() for cell in row.split("│")[1:-1]] == [
        "totals",
        "-",
        "-",
        "no tokens  2 positions (a Spark projection's own sink: `processors reset --sink` "
        "clears them)",
        "-",
        "-",
    ]


BEHIND = TimeUUID.min_for_epoch_ns(1_700_000_000_000_000_000)


AHEAD = TimeUUID.min_for_epoch_ns(1_700_000_001_000_000_000)


def _merged_processor(url: str) -> None:
    """Processor counts: Segment[1/1] at AHEAD merged into Segment[0/1] at BEHIND, unclaimed."""
    with stores_at(url) as stores:
        stores.tokens.initialize("counts", segment_count=2)
        for segment_id, offset in ((0, BEHIND), (1, AHEAD)):
            stores.tokens.claim("counts", segment_id, "w", now_ms=0, claim_timeout_ms=1)
            with stores.tokens.batch("counts", segment_id, "w") as batch:
                batch.store_token(TrackingToken(offset))
        stores.tokens.release("counts", 1, "w")
        stores.tokens.merge("counts", 0, "w", now_ms=0, claim_timeout_ms=1)
        stores.tokens.release("counts", 0, "w")


def test_status_json_carries_plain_offsets_and_the_merged_parts_ahead(
    runner: CliRunner, tmp_path: Path
) -> None:
    """The JSON token used to be the display text `<offset> (+1 merged part(s) ahead)`."""
    url = f"sqlite:///{tmp_path}/p.db"
    behind, ahead = BEHIND, AHEAD
    _merged_processor(url)
    merged = {
        "segment": "Segment[0/0]",
        "owner": None,
        "token": str(behind),
        "ahead": [{"segment": "Segment[1/1]", "offset": str(ahead)}],
        "claim_age_ms": None,
        "claim_expired": False,
        "replay_until": None,
        "request": None,
        "request_age_ms": None,
    }
    code, out, _ = _run(runner, "processors", "status", "--journal", url, "--json")
    assert (code, json.loads(out)) == (0, [{"processor": "counts", **merged, "positions": None}])
    log = tmp_path / "log"
    log.mkdir()
    code, out, _ = _run(runner, "status", "--journal", url, "--change-log", str(log), "--json")
    assert (code, json.loads(out)["processors"][0]["segments"]) == (0, [merged])
    assert _run(runner, "processors", "reset", "counts", "--journal", url)[0] == 0

    code, out, _ = _run(runner, "processors", "status", "--journal", url, "--json")

    (row,) = json.loads(out)
    assert (row["token"], row["ahead"], row["replay_until"]) == (None, [], str(ahead))


def test_status_shows_a_segment_that_processed_nothing_at_start_as_processors_status_does(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ordo status` showed its token as `-`, `processors status` as `start`."""
    monkeypatch.setenv("COLUMNS", "200")  # the table's rows on one line each
    url = f"sqlite:///{tmp_path}/p.db"
    with stores_at(url) as stores:
        stores.tokens.initialize("counts", segment_count=1)
    log = tmp_path / "log"
    log.mkdir()

    code, out, _ = _run(runner, "processors", "status", "--journal", url)
    assert (code, out) == (0, "counts  Segment[0/0]     owner=-  not claimed  token=start\n")
    code, out, _ = _run(runner, "status", "--journal", url, "--change-log", str(log))
    assert code == 0
    row = next(line for line in out.splitlines() if "counts" in line)
    assert [cell.strip() for cell in row.split("│")[1:-1]][:5] == [
        "counts",
        "Segment[0/0]",
        "-",
        "start",
        "-",
    ]


def test_status_text_shows_the_merged_parts_ahead(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ordo status showed only the token, and processors status only `(+1 merged part(s) ahead)`:
    neither said which part was ahead, nor up to where, as the JSON does."""
    monkeypatch.setenv("COLUMNS", "200")  # rich's table would fold the offsets at 80
    url = f"sqlite:///{tmp_path}/p.db"
    _merged_processor(url)
    part = f"merged part Segment[1/1] ahead at {AHEAD}"

    code, out, _ = _run(runner, "processors", "status", "--journal", url)

    assert (code, out.strip()) == (
        0,
        f"counts  Segment[0/0]     owner=-  not claimed  token={BEHIND}  {part}",
    )
    log = tmp_path / "log"
    log.mkdir()
    code, out, _ = _run(runner, "status", "--journal", url, "--change-log", str(log))
    assert code == 0
    lines = out.splitlines()
    (row,) = [n for n, line in enumerate(lines) if str(BEHIND) in line]
    assert lines[row + 1].index(part) == lines[row].index(str(BEHIND))  # the token's cell


def test_status_shows_a_request_its_owner_has_not_taken_yet(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`processors split` on a running processor only asks the owner: status showed nothing of
    it, so an operator could not tell a pending split from one that was lost."""
    monkeypatch.setenv("COLUMNS", "200")
    url = f"sqlite:///{tmp_path}/p.db"
    with stores_at(url) as stores:
        stores.tokens.initialize("counts", segment_count=2)
        stores.tokens.claim(
            "counts", 1, "worker-1", now_ms=time.time_ns() // 1_000_000, claim_timeout_ms=1
        )
    code, out, _ = _run(runner, "processors", "split", "counts", "1", "--journal", url)
    assert (code, out.strip()) == (0, "asked worker-1 to split segment Segment[1/1]")

    code, out, _ = _run(runner, "processors", "status", "--journal", url, "--json")

    rows = {row["segment"]: row for row in json.loads(out)}
    assert (rows["Segment[0/1]"]["request"], rows["Segment[0/1]"]["request_age_ms"]) == (None, None)
    assert rows["Segment[1/1]"]["request"] == "split"
    assert 0 <= rows["Segment[1/1]"]["request_age_ms"] < 60_000
    code, out, _ = _run(runner, "processors", "status", "--journal", url)
    assert code == 0
    first, second = out.strip().splitlines()
    assert "requested" not in first
    assert re.search(r"owner=worker-1 .* split requested \d+\.\d s ago$", second)
    log = tmp_path / "log"
    log.mkdir()
    code, out, _ = _run(runner, "status", "--journal", url, "--change-log", str(log), "--json")
    segments = json.loads(out)["processors"][0]["segments"]
    assert [s["request"] for s in segments] == [None, "split"]
    code, out, _ = _run(runner, "status", "--journal", url, "--change-log", str(log))
    assert "split requested" in out
    with stores_at(url) as stores:
        assert stores.tokens.take_request("counts", 1) is not None

    code, out, _ = _run(runner, "processors", "status", "--journal", url)

    assert "requested" not in out


def test_a_caught_up_processor_lags_by_nothing_in_time_either(
    runner: CliRunner, tmp_path: Path
) -> None:
    """It showed the age of the last event it read: `0 events, 25.0 s` for one that was idle;
    and a lag of one event as `1 events`."""
    url = f"sqlite:///{tmp_path}/j.db"
    with open_journal(url) as journal:
        (offset,) = journal.append("order-1", [NewEvent.of({"n": 1}, tags=["order"])]).offsets
    with stores_at(url) as stores:
        stores.tokens.initialize("counts", segment_count=1)
        stores.tokens.claim("counts", 0, "w", now_ms=0, claim_timeout_ms=1)
        with stores.tokens.batch("counts", 0, "w") as batch:
            batch.store_token(TrackingToken(offset))
        later = offset.epoch_ms + 25_000
        caught_up = processor_status(
            stores.tokens, stores.operations, "counts", now_ms=later, claim_timeout_ms=10_000
        )
    with open_journal(url) as journal:
        journal.append("order-2", [NewEvent.of({"n": 2}, tags=["order"])])
    with stores_at(url) as stores:
        behind = processor_status(
            stores.tokens, stores.operations, "counts", now_ms=later, claim_timeout_ms=10_000
        )

    assert (caught_up.lag_events, caught_up.lag_ms) == (0, 0)
    assert (behind.lag_events, behind.lag_ms) == (1, 25_000)
    code, out, _ = _run(runner, "status", "--journal", url)
    assert (code, "1 events" in out, "1 event," in out) == (0, False, True)


def test_status_tells_a_claim_older_than_the_claim_timeout_has_expired(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An owner that stopped renewing its claim was shown as owning the segment for good.

    Any worker may take a segment whose claim expired (Axon's rule), so an operator reading
    `owner=w1` of a crashed worker looked for the wrong cause of a stalled segment.
    """
    url = f"sqlite:///{tmp_path}/p.db"
    now_ms = time.time_ns() // 1_000_000
    with stores_at(url) as stores:
        stores.tokens.initialize("counts", segment_count=2)
        stores.tokens.claim("counts", 0, "gone", now_ms=now_ms - 60_000, claim_timeout_ms=1)
        stores.tokens.claim("counts", 1, "live", now_ms=now_ms, claim_timeout_ms=1)
    monkeypatch.setenv("ORDO_CLAIM_TIMEOUT_MS", "30000")

    code, out, _ = _run(runner, "processors", "status", "--journal", url)

    assert code == 0
    gone, live = out.splitlines()
    assert re.search(r"owner=gone  claimed \d+ ms ago, expired  token=start$", gone), gone
    assert re.search(r"owner=live  claimed \d+ ms ago  token=start$", live), live
    code, out, _ = _run(runner, "processors", "status", "--journal", url, "--json")
    assert [(row["owner"], row["claim_expired"]) for row in json.loads(out)] == [
        ("gone", True),
        ("live", False),
    ]
    monkeypatch.setenv("COLUMNS", "200")  # the table's rows on one line each
    log = tmp_path / "log"
    log.mkdir()
    code, out, _ = _run(runner, "status", "--journal", url, "--change-log", str(log))
    assert code == 0
    rows = [line for line in out.splitlines() if "counts" in line]
    assert [row.split("│")[5].strip().endswith("s, expired") for row in rows] == [True, False]
