"""The bench scripts' report: the machine header and the figure/value/unit table.

Imported by the bench scripts; running it directly does nothing (`make bench` runs every
bench/*.py file).
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple


class Row(NamedTuple):
    """One line of the table."""

    figure: str
    value: str
    unit: str


def print_table(rows: Sequence[Row], *, unit_rule: int = 30) -> None:
    """Figures left-aligned, values right-aligned, a rule under the header.

    `unit_rule` is the length of the rule under the unit column.
    """
    header = Row("figure", "value", "unit")
    width_figure = max(len(r.figure) for r in (header, *rows))
    width_value = max(len(r.value) for r in (header, *rows))
    for i, row in enumerate((header, *rows)):
        print(f"{row.figure:<{width_figure}}  {row.value:>{width_value}}  {row.unit}")
        if i == 0:
            print(f"{'-' * width_figure}  {'-' * width_value}  {'-' * unit_rule}")


def ratio_row(figure: str, value: float, *, target: float, at_least: bool = True) -> Row:
    """A ratio against its target: PASS when `value` >= `target` (<= when not `at_least`)."""
    is_pass = value >= target if at_least else value <= target
    relation = ">=" if at_least else "<="
    verdict = "PASS" if is_pass else "MISS"
    return Row(figure, f"{value:.2f}", f"x (target {relation} {target:.2f}) {verdict}")


def machine_lines(
    *, postgres_version: str | None = None, libraries: Sequence[str] = ("ordo",)
) -> list[str]:
    """The header: CPUs, Python, SQLite, PostgreSQL (when given), load, library versions."""
    model = "?"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    lines = [
        f"machine:    {len(os.sched_getaffinity(0))} CPUs (nproc), {model}, {platform.machine()}",
        f"python:     {platform.python_version()} ({platform.python_implementation()})",
        f"sqlite:     {sqlite3.sqlite_version}",
    ]
    if postgres_version is not None:
        lines.append(f"postgresql: {postgres_version}")
    lines.append(
        "load:       {:.2f} {:.2f} {:.2f} (1, 5, 15 min) at the start".format(*os.getloadavg())
    )
    if libraries:
        versions = ", ".join(f"{package} {_version(package)}" for package in libraries)
        lines.append(f"libraries:  {versions}")
    return lines


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "?"
