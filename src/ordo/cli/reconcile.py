"""`ordo reconcile`: delete, rebuild, list and truncate tag views (seed 000 reconciliation)."""

from __future__ import annotations

import click
from click.core import ParameterSource

from ordo.cli.command_group import CommandGroup
from ordo.cli.operations_options import (
    OperationRequest,
    guarded_options,
    spark_partitions_option,
    tag_option,
)
from ordo.cli.options import (
    ThrottledProgress,
    journal_option,
    json_option,
    master_options,
    print_json,
    progress,
    read_only_stores,
)
from ordo.cli.termination import stoppable
from ordo.tools.receipts import OperationReceipt
from ordo.tools.reconciliation import Reconciliation
from ordo.types import PersistenceId, Tag
from ordo.wording import counted, shown_name

_ONE_ID_TAG = "Only this tag (default: every tag of the persistence id)."
_REBUILD_INTERRUPTED = (
    "rebuild interrupted: the rows written so far stay, the others are missing; run "
    "`ordo reconcile rebuild --all` again to write them (it upserts)"
)


@click.group(cls=CommandGroup)
def reconcile() -> None:
    """Repair tag views: delete, rebuild, list tags, truncate.

    Operations on a persistence id refuse to run while a live writer holds a lease on it;
    truncate and rebuild --all refuse while any writer is live. --force overrides.
    """


@reconcile.command()
@journal_option
@json_option
@click.argument("persistence_id", required=False)
def tags(journal_url: str | None, as_json: bool, persistence_id: str | None) -> None:
    """List every tag (a full scan of tag_views), or the tags of PERSISTENCE_ID.

    It only reads, so it opens the journal as the other reading commands do: an older schema is
    refused rather than upgraded, and an SQLite journal keeps its journal mode.
    """
    with read_only_stores(journal_url) as stores:
        reconciliation = Reconciliation.of(stores)
        if persistence_id is None:
            summaries = reconciliation.tags()
            if as_json:
                print_json(
                    [
                        {"tag": s.tag, "events": s.events, "persistence_ids": s.persistence_ids}
                        for s in summaries
                    ]
                )
            for s in () if as_json else summaries:
                ids = counted(s.persistence_ids, "persistence id")
                click.echo(f"{shown_name(s.tag)}  {counted(s.events, 'event')}  {ids}")
            return
        found = reconciliation.tags_of(PersistenceId(persistence_id))
    if as_json:
        print_json({"persistence_id": persistence_id, "tags": list(found)})
    elif found:
        click.echo("\n".join(map(shown_name, found)))
    else:
        click.echo(f"persistence_id={persistence_id!r} has no tags: nothing to do")


@reconcile.command()
@guarded_options
@tag_option(_ONE_ID_TAG)
@click.argument("persistence_id")
def delete(request: OperationRequest, tag: Tag | None, persistence_id: str) -> None:
    """Delete the tag views of PERSISTENCE_ID with their progress and tag_scanning.

    They are rebuilt when the persistence id is next started, or by `ordo reconcile rebuild`.
    Rows of events deleted from the journal cannot be: they are gone for good (the progress of
    those events is kept, so that their tags are numbered on).
    """
    with request.tool(Reconciliation) as reconciliation:
        receipt = reconciliation.delete_tag_views(
            PersistenceId(persistence_id), tag=tag, force=request.force, dry_run=request.dry_run
        )
    request.render(receipt)


@reconcile.command()
@guarded_options
@tag_option(_ONE_ID_TAG)
@click.option("--all", "every", is_flag=True, help="Rebuild every persistence id (Spark job).")
@click.option("--local", is_flag=True, help="With --all: one Python process instead of Spark.")
@click.option("--truncate", is_flag=True, help="With --all: truncate the tag views first.")
@spark_partitions_option("With --all: Spark partitions.")
@master_options("local[*]", "With --all: the Spark master.", prefix="With --all: ")
@click.argument("persistence_id", required=False)
def rebuild(
    request: OperationRequest,
    tag: Tag | None,
    every: bool,
    local: bool,
    truncate: bool,
    partitions: int,
    master: str,
    executor_timeout_ms: int,
    persistence_id: str | None,
) -> None:
    """Rebuild the tag views of PERSISTENCE_ID from the journal, or of all (--all).

    Same tag pid sequence nrs, buckets and offsets as a fresh write; idempotent.
    """
    # Usage errors (exit 2), as click's own missing argument is: PERSISTENCE_ID is optional
    # only because --all stands in for it, and the other options belong to one of the two.
    ctx = click.get_current_context()
    if every == (persistence_id is not None):
        msg = "give a PERSISTENCE_ID or --all (not both)"
        raise click.UsageError(msg, ctx=ctx)
    if every and tag is not None:
        msg = "--tag applies to one persistence id; --all rebuilds every tag"
        raise click.UsageError(msg, ctx=ctx)
    given = [  # on the command line: ORDO_EXECUTOR_TIMEOUT_MS may be set for every command
        name
        for name in ("local", "truncate", "partitions", "master", "executor_timeout_ms")
        if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE
    ]
    if not every and given:
        msg = f"{_options(given)} only with --all; a single persistence id is rebuilt in place"
        raise click.UsageError(msg, ctx=ctx)
    on_spark = [n for n in given if n in ("partitions", "master", "executor_timeout_ms")]
    if local and on_spark:  # they were ignored: the rebuild ran in this process
        msg = f"{_options(on_spark)} to the Spark job; --local rebuilds in this process"
        raise click.UsageError(msg, ctx=ctx)
    force, dry_run = request.force, request.dry_run
    if persistence_id is not None:
        with request.tool(Reconciliation) as reconciliation:
            receipt = reconciliation.rebuild_tag_views(
                PersistenceId(persistence_id), tag=tag, force=force, dry_run=dry_run
            )
        request.render(receipt)
        return
    truncated: OperationReceipt | None = None
    if local:
        with (  # SIGTERM too: its default action ended the rebuild without its line
            stoppable(_REBUILD_INTERRUPTED),
            request.tool(Reconciliation) as reconciliation,
            ThrottledProgress() as show,
        ):
            if truncate:
                truncated = _truncate(reconciliation, request)
            receipt = reconciliation.rebuild_all_locally(
                force=force, dry_run=dry_run, on_progress=show
            )
    else:
        with stoppable(_REBUILD_INTERRUPTED):  # the check and pyspark's import take time too
            request.check_journal()
            receipt, truncated = _rebuild_on_spark(
                request,
                master,
                partitions,
                executor_timeout_ms=executor_timeout_ms,
                truncate=truncate,
            )
    request.render(receipt if truncated is None else receipt.after(truncated))


def _options(names: list[str]) -> str:
    """`--a, --b apply` (or `--a applies`): the start of a message about options given."""
    verb = "applies" if len(names) == 1 else "apply"
    return f"{', '.join('--' + name.replace('_', '-') for name in names)} {verb}"


def _truncate(reconciliation: Reconciliation, request: OperationRequest) -> OperationReceipt:
    """The truncate before a rebuild --all, reported on stderr as it is done."""
    truncated = reconciliation.truncate(force=request.force, dry_run=request.dry_run)
    progress(truncated.describe())
    return truncated


@reconcile.command()
@guarded_options
def truncate(request: OperationRequest) -> None:
    """Delete every tag view row, its progress and tag_scanning (rebuild afterwards).

    Rows of events deleted from the journal cannot be rebuilt: they are gone for good (the
    progress of those events is kept, so that their tags are numbered on).
    """
    with request.tool(Reconciliation) as reconciliation:
        receipt = reconciliation.truncate(force=request.force, dry_run=request.dry_run)
    request.render(receipt)


def _rebuild_on_spark(
    request: OperationRequest,
    master: str,
    partitions: int,
    *,
    executor_timeout_ms: int,
    truncate: bool,
) -> tuple[OperationReceipt, OperationReceipt | None]:
    """Rebuild every tag view on Spark; with `truncate`, truncate them once Spark runs.

    Spark is started first: a Spark that does not start (a cluster that cannot be reached, or
    that starts no executor within `executor_timeout_ms`) must not leave the tag views truncated
    with nothing rebuilt. Ctrl-C cancels the rebuild's Spark job (`run_job`) and raises
    KeyboardInterrupt; SIGTERM raises Terminated so too, during the truncate as during the job
    (the command holds `stoppable` from its first step).
    """
    from ordo.spark.interruption import run_job
    from ordo.spark.job_session import job_session
    from ordo.spark.rebuild import rebuild_all

    progress("rebuilding every tag view on Spark ...")
    with job_session(
        master=master,
        app_name="ordo-rebuild",
        executor_timeout_ms=executor_timeout_ms,
        announce=progress,
    ) as spark:
        truncated: OperationReceipt | None = None
        if truncate:
            with request.tool(Reconciliation) as reconciliation:
                truncated = _truncate(reconciliation, request)
        receipt = run_job(
            spark,
            lambda: rebuild_all(
                spark,
                request.url,
                force=request.force,
                dry_run=request.dry_run,
                partitions=partitions,
                settings=request.settings,
            ),
        )
    return receipt, truncated
