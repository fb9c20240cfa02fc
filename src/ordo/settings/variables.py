"""Every ORDO_* environment variable ordo reads outside the command line's options.

A misspelt variable (`ORDO_FLUSH_INTERVAL` for ORDO_FLUSH_INTERVAL_MS) is read by nobody and
changes nothing, without a word: the command line warns of each ORDO_* variable set that is not
one of these or an option's (`ordo.cli.environment`), and docs/cli.md lists exactly these.
"""

from __future__ import annotations

from typing import Any

from ordo.settings.loading import LoadableSettings

SPARK_LOG_VARIABLE = "ORDO_SPARK_LOG"
"""Environment variable naming the file a command's Spark writes its console output to."""
CLASS_ARCHIVE_VARIABLE = "ORDO_SPARK_CLASS_ARCHIVE"
"""Environment variable naming the folder of Spark's class-data archives, or `off` for none
(`ordo.spark.class_archive`)."""
TEST_SERVER_VARIABLE = "ORDO_TEST_POSTGRES_DSN"
"""The PostgreSQL server ordo's own test suite uses instead of starting one (tests/conftest.py):
set in a developer's shell, it is no typo for the commands the tests run."""


def settings_classes(base: type[Any] = LoadableSettings) -> set[type[LoadableSettings]]:
    """Every settings dataclass (a frozen slots dataclass is a subclass of its declaration)."""
    found: set[type[LoadableSettings]] = set()
    for cls in base.__subclasses__():
        found |= {cls, *settings_classes(cls)}
    return found


def settings_variables() -> set[str]:
    """The variables the settings' from_env() read, the Spark log's and its class archive's."""
    named = {name for cls in settings_classes() for name in cls.env_variables().values()}
    return named | {SPARK_LOG_VARIABLE, CLASS_ARCHIVE_VARIABLE}
