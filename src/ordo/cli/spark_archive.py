"""`ordo spark archive`: make the class-data archive that Spark's driver JVM starts sooner from.

Spark is imported only when the command runs (its output file's name comes with it): every
other `ordo` command imports this module too, and starts without it.
"""

from __future__ import annotations

import os

import click

from ordo.cli.command_group import CommandGroup
from ordo.cli.options import json_option, print_fields, print_json, progress
from ordo.cli.termination import stoppable
from ordo.errors import ClassArchiveError
from ordo.settings.variables import CLASS_ARCHIVE_VARIABLE

_APP = "ordo-class-archive"
"""The warm-up's job name: its Spark output file is `<temp dir>/ordo-class-archive.log`."""


@click.group(cls=CommandGroup)
def spark() -> None:
    """Spark on this machine: the class-data archive its driver JVM starts from."""


@spark.command()
@json_option
def archive(as_json: bool) -> None:
    """Make Spark's class-data archive, from which the commands' Spark then starts 2 s sooner.

    One start of Spark running small jobs and a stream whose JVM writes the classes it loaded
    into an archive (about a minute, some 200 MB) for this Java, Spark install and
    SPARK_SUBMIT_OPTS, in ORDO_SPARK_CLASS_ARCHIVE's folder, else the user's cache folder
    (~/.cache/ordo). Every later start of Spark by ordo (start_session) maps it, until Java,
    Spark or those options change; an archive that exists already is shown, not made again.
    Prints where it is and its size. Removes the folder's other archives that no start of
    Spark used for 30 days (those of an older Java or pyspark), and files a stopped maker left,
    printing each with its size.
    """
    from ordo.spark.class_archive import archive_folder, find_archive, make_archive
    from ordo.spark.class_archive import submit_options as read_options
    from ordo.spark.class_archive_cleanup import remove_unused_archives
    from ordo.spark.job_session import spark_output_path

    folder = archive_folder(os.environ)
    if folder is None:
        msg = f"{CLASS_ARCHIVE_VARIABLE} is off: unset it (or name a folder) to make an archive"
        raise ClassArchiveError(msg)
    options = read_options(os.environ)
    found = find_archive(folder, options)
    if found is None:
        output = spark_output_path(_APP)
        with stoppable(f"spark archive interrupted: no archive made in {folder}"):
            found = make_archive(
                folder=folder,
                options=options,
                output=output,
                announce=progress,
            )
    removed = remove_unused_archives(folder, keep=found.path)
    document = {"archive": str(found.path), "size_bytes": found.size_bytes, "made": found.is_new}
    if as_json:
        files = [{"path": str(file.path), "size_bytes": file.size_bytes} for file in removed]
        print_json({**document, "removed": files})
        return
    print_fields(document)
    for file in removed:
        click.echo(f"{'removed':<12}{file.path} ({file.size_bytes:,} bytes)")
