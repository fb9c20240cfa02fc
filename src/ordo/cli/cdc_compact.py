"""`ordo cdc compact`: merge each table's small change log files into larger ones."""

from __future__ import annotations

from pathlib import Path

import click

from ordo.cli.cdc_options import change_log_option, require_named_change_log
from ordo.cli.options import ThrottledProgress, int_option, json_option, print_json
from ordo.cli.termination import stoppable
from ordo.wording import counted, shown_name

DEFAULT_MAX_ROWS = 100_000
"""Rows of a merged file unless --max-rows says otherwise. A merge holds its rows in memory
(tens of MB for this many rows of a table of a dozen columns), and a file of that many rows is a
few MB of Parquet, which one Spark task reads quickly: a capture's one-second files of a busy
table become a few files a day per partition."""


@click.command()
@change_log_option
@click.option(
    "--table",
    "tables",
    multiple=True,
    help="A table whose change log to compact (repeatable; default: every table's).",
)
@int_option(
    "--max-rows", DEFAULT_MAX_ROWS, "Rows of a merged file at most (a larger file stays whole)."
)
@json_option
def compact(change_log: Path, tables: tuple[str, ...], max_rows: int, as_json: bool) -> None:
    """Merge each table's small change log files into files of at most --max-rows rows.

    Per partition and segment, files that follow each other by position are merged; the file
    names keep every segment's highest position, which captures resume from. It may run beside
    a capture and a materializer (docs/cdc.md, "Its size"); a second compaction of a table is
    refused while one runs. Files of mutations without positions are left as they are. One line
    per table on stdout (files before and after, rows), progress on stderr.
    """
    from ordo.storage.parquet import ParquetChangeLog
    from ordo.storage.parquet.compaction import compact_table, table_logs

    require_named_change_log(change_log)
    log = ParquetChangeLog(change_log)
    receipts = []
    left = "cdc compact interrupted: nothing is lost; the next compaction removes what it left"
    with stoppable(left), ThrottledProgress() as show:
        for table in table_logs(log, tables):
            receipt = compact_table(log, table, max_rows=max_rows, show=show)
            receipts.append(receipt)
            if not as_json:
                leftovers = receipt.leftovers
                removed = f"; removed {counted(leftovers, 'file')} already merged" * bool(leftovers)
                click.echo(
                    f"{shown_name(table)}: {counted(receipt.files_before, 'file')} -> "
                    f"{receipt.files_after:,}, {counted(receipt.rows, 'row')}{removed}"
                )
    if as_json:
        print_json({"tables": [receipt.to_json() for receipt in receipts]})
