"""Options also given by an ORDO_* environment variable, which refuse the variable set but empty."""

from __future__ import annotations

import os

import click


class VariableOption(click.Option):
    """A click option whose variable, set to an empty value, is a usage error naming it.

    click reads an empty variable as unset: `ORDO_RECONNECT_TIMEOUT_MS=` (a shell variable that
    expanded to nothing) gave the default without a word, while the settings loaders refuse an
    empty ORDO_* value, naming it (`CaptureSettings.from_env`): one variable, two meanings. The
    option given on the command line wins over its variable, empty or not, as before.
    """

    def resolve_envvar_value(self, ctx: click.Context) -> str | None:
        """The variable's value; BadParameter (exit 2, naming the variable) when it is empty."""
        if isinstance(self.envvar, str) and os.environ.get(self.envvar) == "":
            msg = "the variable is set but empty (unset it for the default)"
            raise click.BadParameter(msg, ctx=ctx, param=self)
        return super().resolve_envvar_value(ctx)
