"""A warning for each ORDO_* variable set that ordo does not read: a misspelt name."""

from __future__ import annotations

import difflib
import logging
from collections.abc import Mapping

import click

from ordo.settings import ENV_PREFIX
from ordo.settings.variables import TEST_SERVER_VARIABLE, settings_variables

_log = logging.getLogger(__name__)

OPTION_VARIABLES = frozenset(
    {
        "ORDO_CDC_CHANGE_LOG",
        "ORDO_CDC_FLUSH_INTERVAL_MS",
        "ORDO_EXECUTOR_TIMEOUT_MS",
        "ORDO_JOURNAL",
        "ORDO_LOG_LEVEL",
        "ORDO_MAX_CHANGES",
        "ORDO_RECONNECT_TIMEOUT_MS",
        "ORDO_WRITER_LEASE_TIMEOUT_MS",
    }
)
"""The variables of the options of `ordo`'s commands: what `option_variables` finds from the
root, which imports every command's module (`LazyCommands`), where every command's start looks
(a test keeps the two equal)."""


def option_variables(command: click.Command) -> set[str]:
    """The variables of the options of `command` (the root's too) and of its subcommands."""
    names: set[str] = set()
    for param in command.params:
        names.update([param.envvar] if isinstance(param.envvar, str) else param.envvar or [])
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            names |= option_variables(sub)
    return names


def variables_read(root: click.Command) -> set[str]:
    """Every ORDO_* variable ordo reads: the settings', the Spark log's and the options'."""
    return settings_variables() | option_variables(root)


def warn_of_unread_variables(root: click.Command, environ: Mapping[str, str]) -> None:
    """Log a warning naming each ORDO_* variable in `environ` that nothing reads.

    `ORDO_FLUSH_INTERVAL=0` (for ORDO_FLUSH_INTERVAL_MS) left the default in force while the
    user believed it changed; a warning rather than an error, as the prefix is not reserved to
    ordo. The closest variable ordo reads, when there is one, is named with it.

    The options' variables are `OPTION_VARIABLES`; the commands' options are walked only for a
    variable that is none of those, as that walk imports every command's module.
    """
    read = settings_variables() | OPTION_VARIABLES | {TEST_SERVER_VARIABLE}
    unread = sorted(name for name in environ if name.startswith(ENV_PREFIX) and name not in read)
    if unread:
        read |= option_variables(root)
    for name in unread:
        if name not in read:
            meant = _closest(name, read)
            _log.warning("%s is not a variable ordo reads; it is ignored%s", name, meant)


def _closest(name: str, read: set[str]) -> str:
    """` (did you mean X?)` for the variable read most like `name`, or "".

    Names are compared without the prefix they share, which made every ORDO_* name look like
    some variable.
    """
    bare = {known.removeprefix(ENV_PREFIX): known for known in read}
    close = difflib.get_close_matches(name.removeprefix(ENV_PREFIX), sorted(bare), n=1)
    return f" (did you mean {bare[close[0]]}?)" if close else ""
