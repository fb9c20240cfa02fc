"""`ordo verify`: compare the journal with its tag views on Spark; --repair fixes what differs."""

from __future__ import annotations

import click

from ordo.cli.operations_options import OperationRequest, guarded_options, spark_partitions_option
from ordo.cli.options import ThrottledProgress, master_options, print_json, progress
from ordo.cli.termination import interruptible, stoppable
from ordo.storage.open import init_storage, open_existing_stores
from ordo.tools.reconciliation import Reconciliation
from ordo.tools.verify_report import VerifyReport

_INTERRUPTED = "verify interrupted: Spark's jobs cancelled, no verdict"
_REPAIR_INTERRUPTED = (
    "verify interrupted during the repair: the persistence ids rebuilt so far stay rebuilt, "
    "the others are as they were; run `ordo verify --repair` again"
)
_AGAIN_INTERRUPTED = "verify interrupted: the repair is done (see above), no verdict after it"


@click.command()
@guarded_options
@click.option("--repair", is_flag=True, help="Rebuild what differs, then verify again.")
@spark_partitions_option("Spark read partitions.")
@master_options("local[*]", "The Spark master.")
@click.pass_context
def verify(
    ctx: click.Context,
    request: OperationRequest,
    repair: bool,
    partitions: int,
    master: str,
    executor_timeout_ms: int,
) -> None:
    """Check that the tag views hold every tagged event exactly once, numbered right.

    Reports tagged events missing from the tag views, rows without a journal event,
    duplicated rows, wrong tag pid sequence nrs, gaps in them and rows in the wrong time
    bucket. Exits with status 1 when anything is wrong (after --repair: still wrong).
    """
    with stoppable(_INTERRUPTED):  # from the start: importing pyspark takes seconds
        from ordo.spark.interruption import run_job
        from ordo.spark.job_session import job_session
        from ordo.spark.verify import verify_tag_views

        url, as_json = request.url, request.as_json
        if repair and not request.dry_run:
            init_storage(url)  # a repair writes: the journal is upgraded first, as by reconcile
        else:
            open_existing_stores(url).close()  # only reads: an older schema is refused before Spark
        progress("verifying tag views on Spark ...")
        with job_session(
            master=master,
            app_name="ordo-verify",
            executor_timeout_ms=executor_timeout_ms,
            announce=progress,
        ) as spark:
            report = run_job(spark, lambda: verify_tag_views(spark, url, partitions=partitions))
            document: dict[str, object] = {"report": report.to_json_dict()}
            _show(report, as_json=as_json)
            if repair and not report.is_clean:
                with (  # the repair's own line: what a stop leaves is no longer the verify's
                    stoppable(_REPAIR_INTERRUPTED),
                    request.tool(Reconciliation) as reconciliation,
                    ThrottledProgress() as show,
                ):
                    receipt = reconciliation.rebuild_pairs(
                        report.affected,
                        force=request.force,
                        dry_run=request.dry_run,
                        on_progress=show,
                    )
                document["repair"] = receipt.to_json_dict()
                if not as_json:
                    click.echo(receipt.describe())
                if not request.dry_run:
                    progress("verifying again ...")
                    with interruptible(_AGAIN_INTERRUPTED):
                        report = run_job(
                            spark, lambda: verify_tag_views(spark, url, partitions=partitions)
                        )
                    document["after_repair"] = report.to_json_dict()
                    _show(report, as_json=as_json)
    if as_json:
        print_json(document)
    if not report.is_clean:
        ctx.exit(1)


def _show(report: VerifyReport, *, as_json: bool) -> None:
    if not as_json:
        click.echo("\n".join(report.describe_lines()))
