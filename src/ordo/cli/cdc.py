"""`ordo cdc`: capture, ingest, materialize, compact, schemas, status and the replica simulation.

The group and its smaller commands; capture, materialize, compact and schemas have modules of
their own.
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import click

from ordo.cdc import Publisher, SchemaRegistry
from ordo.cdc.change_rows import ChangeRows
from ordo.cdc.ingest import MutationLines, parse_mutation_lines, prepare_ingest
from ordo.cli.cdc_capture import capture
from ordo.cli.cdc_compact import compact
from ordo.cli.cdc_materialize import materialize
from ordo.cli.cdc_options import (
    change_log_option,
    partitions_option,
    require_named_change_log,
    source_status_options,
)
from ordo.cli.cdc_schemas import schemas
from ordo.cli.command_group import CommandGroup
from ordo.cli.exit_status import interrupted_status
from ordo.cli.options import (
    NUMBER,
    existing_journal,
    int_option,
    journal_option,
    json_option,
    master_options,
    non_empty,
    print_fields,
    print_json,
    progress,
    require_journal,
)
from ordo.cli.termination import stoppable
from ordo.interrupts import run_interruptibly
from ordo.storage.open import existing_stores_at, open_existing_stores


@click.group(cls=CommandGroup)
def cdc() -> None:
    """Change data capture: source changes -> keyed change log -> full-row change messages."""


for command in (capture, compact, materialize, schemas):
    cdc.add_command(command)


@cdc.command()
@journal_option
@change_log_option
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@partitions_option
def ingest(
    journal_url: str | None, change_log: Path, files: tuple[Path, ...], partitions: int | None
) -> None:
    """Publish raw mutations (JSON lines, docs/cdc.md) from FILES or stdin into the change log.

    Every line of every input is checked first, and every table's schema looked up: a malformed
    line, or a table with no registered schema (`ordo cdc schemas register`), is reported with
    its file and line number and nothing of any input is published. Then each input is
    published in turn and reported once it is in; when storage fails, the inputs reported stay
    published, and running the command again publishes what the change log lacks. Ctrl-C, or
    SIGTERM, ends it with one line saying so too (status 130, or 143).
    """
    from ordo.storage.parquet import ParquetChangeLog

    url = existing_journal(journal_url)
    with stoppable("cdc ingest interrupted: nothing published"):
        inputs = [parse_mutation_lines(str(f), f.read_bytes()) for f in files] or [
            parse_mutation_lines("stdin", sys.stdin.buffer.read())
        ]
        publisher = Publisher(ParquetChangeLog(change_log), partitions=partitions)
        with existing_stores_at(url) as stores:  # only read: an older journal is not upgraded
            prepared = prepare_ingest(inputs, publisher, SchemaRegistry(stores.schemas))
        _publish(inputs, prepared, publisher)


def _publish(
    inputs: Sequence[MutationLines], prepared: Sequence[ChangeRows], publisher: Publisher
) -> None:
    """Publish each input's `prepared` rows in turn, reporting each input once it is in.

    A storage error, or a stop (Ctrl-C or SIGTERM), names on stderr what is left
    (`_what_is_left`): the stop in the one line of an interrupted command, which SIGTERM's
    default action did not print, leaving the publish in flight's staged files behind. The
    inputs are published on a thread of their own (`run_interruptibly`), which a stop lets
    finish the input in flight: raised into the publish's wait for its file writers, the
    KeyboardInterrupt broke a lock of the thread pool now and then, and the command ended
    with "cannot release un-acquired lock" and status 1.
    """
    stop = threading.Event()
    done: list[MutationLines] = []

    def publish_each() -> None:
        for lines, rows in zip(inputs, prepared, strict=True):
            if stop.is_set():
                return
            receipt = publisher.publish_rows(rows, check_skipped=False)  # as `ingest`
            count = sum(receipt.published.values())
            click.echo(f"{lines.source}: published {count}, skipped {receipt.skipped}")
            done.append(lines)

    try:
        run_interruptibly(publish_each, cancel=stop.set)
    except KeyboardInterrupt as interrupt:
        left = inputs[len(done) :]
        progress(f"cdc ingest interrupted: {_what_is_left(left) if left else 'all published'}")
        raise click.exceptions.Exit(interrupted_status(interrupt)) from None
    except Exception:
        if len(inputs) > 1:
            progress(_what_is_left(inputs[len(done) :]))
        raise


def _what_is_left(left: Sequence[MutationLines]) -> str:
    """The input whose publish failed (or was stopped) and those after it, not published.

    The inputs before it were each reported as published and stay so: the change log has no
    transaction across them. The failed one may be in part (its tables are appended one by
    one), which a re-run completes, skipping the positions the log holds.
    """
    failed, *rest = left
    after = f"; not published: {', '.join(lines.source for lines in rest)}" if rest else ""
    return (
        f"{failed.source}: not published, or in part{after}; running the command again "
        "publishes what the change log lacks"
    )


@cdc.command()
@journal_option
@change_log_option
@json_option
@source_status_options
def status(
    journal_url: str | None,
    change_log: Path,
    as_json: bool,
    source_url: str | None,
    tables: tuple[str, ...],
    slot: str,
) -> None:
    """Show change logs (partitions, last positions), schemas, materializers and capture lag."""
    from ordo.cli.cdc_status import cdc_table
    from ordo.cli.tables import print_tables
    from ordo.tools.status import cdc_status

    require_named_change_log(change_log)
    found = cdc_status(
        require_journal(journal_url), change_log, source_url=source_url, tables=tables, slot=slot
    )
    if as_json:
        print_json(found.to_json())
    else:
        print_tables(cdc_table(found))


@contextmanager
def _noted(note: str | None, *, once: threading.Event) -> Iterator[None]:
    """An exception or a stop that leaves the block carries `note` (PEP 678), once `once` is set.

    The root command's one-line error ends with it, as an interrupted command's line does
    (`interruptible`): a failed or stopped `cdc simulate --sink` (the materializer failing, the
    sink refusing a write or gone) said what failed but not which run's rows it left in the
    sink. `once` is set when the run has left something there: before, the note said so of a
    run that left nothing (a Spark that did not start).
    """
    try:
        yield
    except BaseException as exc:  # a stop too: its line ends with the note
        if note is not None and once.is_set():
            exc.add_note(note)
        raise


@cdc.command()
@json_option
@master_options("local[2]")
@int_option("--replicas", 3, "Replicas delivering each write.", maximum=16)
@int_option("--keys", 1_000, "Partition keys written.")
@int_option("--mutations", 20_000, "Client writes.")
@click.option("--seed", type=NUMBER, default=1, show_default=True, help="Makes the run repeatable.")
@click.option(
    "--sink",
    default=None,
    callback=non_empty,
    help="An ordo database (SQLite or PostgreSQL URL) to materialize into, under names of the "
    "run's own that stay there (default: a new SQLite file, removed after the run).",
)
def simulate(
    as_json: bool,
    master: str,
    executor_timeout_ms: int,
    replicas: int,
    keys: int,
    mutations: int,
    seed: int,
    sink: str | None,
) -> None:
    """Check G6 with N replicas delivering a workload's writes duplicated, reordered, partial.

    The deliveries go through the change log and the Spark materializer; the checker verifies
    that each message's `before` is the previous `after` of its key, that the materialized
    table equals the fold of the messages and the last-write-wins merge of every mutation, and
    that every message conforms to its schema. Exit status 1 when any check fails. --sink is
    checked (it exists, and is an ordo database of this version) before Spark starts.
    """
    left = "cdc simulate interrupted: the materializer stopped, no verdict"
    recorded = threading.Event()  # set by the run once it has left its schema in the sink
    with stoppable(left):  # from the start: importing pyspark and checking --sink take seconds
        from ordo.simulation.cdc import ReplicaWorkload
        from ordo.spark.cdc_simulation import SimulationRun, run_cdc_simulation
        from ordo.spark.interruption import run_job
        from ordo.spark.job_session import job_session
        from ordo.spark.query_failure import query_failures

        workload = ReplicaWorkload(mutations=mutations, keys=keys, replicas=replicas, seed=seed)
        run = SimulationRun.fresh()
        kept: str | None = None
        if sink is not None:
            open_existing_stores(sink, what="sink database").close()
            # the output's `run` names what the run leaves in the sink; a stop or a failure ends
            # it before that, so their lines name it once the run has left something there
            kept = f"the sink keeps what run {run.name} wrote (docs/cdc.md says how to remove it)"
        with (
            _noted(kept, once=recorded),
            query_failures("cdc simulate"),
            job_session(
                master=master,
                app_name="ordo-cdc-simulate",
                executor_timeout_ms=executor_timeout_ms,
                announce=progress,
            ) as spark,
            tempfile.TemporaryDirectory(prefix="ordo-cdc-simulate-") as work_dir,
        ):
            result = run_job(
                spark,
                lambda: run_cdc_simulation(
                    spark,
                    workload,
                    work_dir=Path(work_dir),
                    sink=sink,
                    run=run,
                    on_recorded=recorded.set,
                ),
            )
    document = result.to_json()
    if as_json:
        click.echo(json.dumps(document))
    else:
        print_fields(document)
    if not result.report.is_clean:
        raise click.exceptions.Exit(1)
