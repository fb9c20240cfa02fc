"""What the `ordo cdc` command tests share: the command run in-process, the simulated
`readings` schema registered and lines of it, one-line errors, a change log's files, a capture
of a table `orders` and its log's segments.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from ordo.cdc import Audit, Cell, JsonValue, Mutation, mutation_to_json
from ordo.cli.root import cli
from ordo.simulation.cdc import SIMULATED_SCHEMA
from ordo.storage.parquet import ParquetChangeLog


def run_ordo(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    """`ordo *args` in-process with `stdin` as its input: its exit code, stdout and stderr."""
    result = CliRunner().invoke(cli, list(args), input=stdin)
    return result.exit_code, result.stdout, result.stderr


def registered(tmp_path: Path, journal: str) -> tuple[str, ...]:
    """An initialized journal with the simulated `readings` schema; the ingest command for it."""
    assert run_ordo("init", "--journal", journal)[0] == 0
    schema_file = tmp_path / "readings.json"
    schema_file.write_text(SIMULATED_SCHEMA.to_json())
    assert run_ordo("cdc", "schemas", "register", str(schema_file), "--journal", journal)[0] == 0
    return ("cdc", "ingest", "--journal", journal, "--change-log", str(tmp_path / "log"))


def readings(**audit: JsonValue) -> str:
    """One JSON line writing a `readings` row, with `audit` fields replaced."""
    document = mutation_to_json(
        Mutation(
            table="readings",
            partition_key=(1,),
            clustering_key=(2,),
            cells={"label": Cell(value="ok", write_time=5)},
            audit=Audit(source="test", segment="seg", position=1),
        )
    )
    assert isinstance(document["audit"], dict)
    document["audit"].update(audit)
    return json.dumps(document)


def one_line_error(code: int, err: str, problem: str) -> None:
    """The command failed as bad input must: exit status 1, one `Error: ` line naming `problem`."""
    assert code == 1
    assert err.startswith("Error: ")
    assert err.count("\n") == 1
    assert problem in err


def log_files(log: Path) -> dict[str, bytes]:
    """Every file of a change log with its content: what a refused command leaves as it was."""
    return {str(f.relative_to(log)): f.read_bytes() for f in log.rglob("*") if f.is_file()}


def capture_orders(log: Path, journal: str, *source: str) -> str:
    """`ordo cdc capture` of the table orders of `source` (its URL and options) into `log`.

    Its summary line; the command must succeed.
    """
    code, out, err = run_ordo(
        "cdc", "capture", *source, "--table", "orders", "--change-log", str(log),
        "--journal", journal,
    )  # fmt: skip
    assert code == 0, err
    return out.strip()


def orders_by_segment(log: Path, of: Callable[[Mutation], int]) -> dict[str, list[int]]:
    """Each segment of the orders log with `of` each of its mutations (position, key), in order."""
    segments: dict[str, list[int]] = {}
    for mutation in ParquetChangeLog(log).read("orders"):
        segments.setdefault(mutation.audit.segment, []).append(of(mutation))
    return {segment: sorted(values) for segment, values in segments.items()}
