"""A group's commands by name, each command's module imported when the command is first asked for.

Every `ordo` command paid for the modules of all the others before it started: the root group
imported each command module to register its command, and with them the CDC ports, the
processors, the simulation and Spark's launch (about 0.2 s of a 0.3 s start). This mapping
holds "module:attribute" for a command not loaded yet (click's "lazy loading of subcommands"),
so `ordo append` imports the journal's commands and not `ordo cdc`'s. Listing the names
(`ordo nosuch`'s "valid: ..." line) imports nothing; `ordo --help`, which shows each
command's help, and a walk of the commands' options import them all.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from importlib import import_module

import click

from ordo.cli.exit_status import STARTING_INTERRUPTED
from ordo.cli.termination import stoppable


class LazyCommands(MutableMapping[str, click.Command]):
    """A click group's `commands`: name -> command, loaded from "module:attribute" on first use.

    Two threads loading a command at once load the same one (imports are locked), so the mapping
    may be shared; `ordo` itself runs one command per process.
    """

    def __init__(self, paths: Mapping[str, str]) -> None:
        """`paths` maps each command's name to where it is: "ordo.cli.journal:append"."""
        self._entries: dict[str, click.Command | str] = dict(paths)

    def __getitem__(self, name: str) -> click.Command:
        """The command `name`, its module imported the first time; KeyError if there is none."""
        entry = self._entries[name]
        if isinstance(entry, str):
            entry = self._entries[name] = _loaded(entry)
        return entry

    def __setitem__(self, name: str, command: click.Command) -> None:
        """Add `command` as `name` (what `click.Group.add_command` does)."""
        self._entries[name] = command

    def __delitem__(self, name: str) -> None:
        """Remove the command `name`."""
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        """The names, without loading any command."""
        return iter(self._entries)

    def __len__(self) -> int:
        """How many commands there are."""
        return len(self._entries)


def _loaded(path: str) -> click.Command:
    """The command at "module:attribute".

    Its module's imports are part of the run's start, as the command line's are
    (`ordo.cli.main`): Ctrl-C or SIGTERM during them ends the run with that start's line and
    status 130 or 143, where Ctrl-C gave click's "Aborted!" and status 1 and SIGTERM its
    default action (status -15, no line).
    """
    module, _, attribute = path.partition(":")
    with stoppable(STARTING_INTERRUPTED):
        command = getattr(import_module(module), attribute)
    if not isinstance(command, click.Command):
        msg = f"{path} is no click command: {command!r}"
        raise TypeError(msg)
    return command
