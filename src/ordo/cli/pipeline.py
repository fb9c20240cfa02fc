"""`ordo pipeline run CONFIG.toml`: run a projection pipeline on Spark."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ordo.cli.command_group import CommandGroup
from ordo.cli.options import master_options
from ordo.cli.streaming import start_query, streaming_job, streaming_session, wait_for


@click.group(cls=CommandGroup)
def pipeline() -> None:
    """Run projection pipelines on Spark."""


@pipeline.command()
@click.argument("config_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@master_options("local[*]")
def run(config_file: Path, master: str, executor_timeout_ms: int) -> None:
    """Run the projection described by CONFIG_FILE.

    With the available_now trigger it stops once it has caught up; with a processing-time
    trigger it runs until interrupted.
    """
    with streaming_job("pipeline"):  # until its file names it: pyspark's import takes seconds
        from ordo.spark.pipeline import PipelineConfig, start_pipeline

        _import_from_working_directory()
        config = PipelineConfig.from_toml(config_file)  # every check, the journal's, before Spark
        app_name = f"ordo-{config.processor}"
        label = f"pipeline {config.processor!r}"
        with (
            streaming_job(label),
            streaming_session(
                label,
                config.checkpoint,
                master=master,
                app_name=app_name,
                executor_timeout_ms=executor_timeout_ms,
            ) as spark,
        ):
            query = start_query(spark, label, lambda: start_pipeline(spark, config))
            wait_for(query, label)
    click.echo(f"pipeline {config.processor!r} stopped; checkpoint at {config.checkpoint}")


def _import_from_working_directory() -> None:
    """Let the handler's module be found in the working directory, as `python -m` does.

    The installed `ordo` script's path starts at its own folder, so `handler = "app:count"`
    next to the user was not found. (Spark's local Python workers start in the same directory
    and find it there; on a cluster the module must be shipped, e.g. with --py-files.)
    """
    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)
