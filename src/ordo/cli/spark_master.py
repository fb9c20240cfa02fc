"""--master: a Spark master URL, checked as the command line is read.

Spark checks the URL only once its JVM has started (seconds), after a command has checked its
journal or taken its checkpoint's lock: `--master nonsense` said so much later, with Spark's
words. The forms below are the ones a PySpark session can be started with (spark-submit's and
SparkContext's): whether a cluster answers at the URL is Spark's to find out.
"""

from __future__ import annotations

import re
from typing import Any

import click

_HOST_PORT = r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}"
_MASTER = re.compile(
    r"local"
    r"|local\[(?:[0-9]+|\*)(?:\s*,\s*[0-9]+)?\]"
    r"|local-cluster\[\s*[0-9]+\s*,\s*[0-9]+\s*,\s*[0-9]+\s*\]"
    rf"|spark://{_HOST_PORT}(?:,{_HOST_PORT})*"
    r"|yarn"
    r"|k8s://\S+"
)
"""Spark's master URLs: local ones (threads, task failures; a local cluster's workers, cores
and memory), a standalone cluster's masters (several for high availability), YARN, Kubernetes."""
FORMS = (
    "local, local[N], local[*], local[N,F], local-cluster[N,C,M], "
    "spark://HOST:PORT[,HOST:PORT...], yarn or k8s://URL"
)
"""The master URL forms, as a usage error lists them."""


class SparkMasterType(click.ParamType[str]):
    """A Spark master URL; any other text is a usage error (exit 2) listing the forms."""

    name = "url"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        """`value` if it is one of Spark's master URL forms (see the module)."""
        if not _MASTER.fullmatch(str(value)):
            self.fail(f"{value!r} is not a Spark master URL ({FORMS})", param, ctx)
        return str(value)


SPARK_MASTER = SparkMasterType()
