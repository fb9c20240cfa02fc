"""The type of every integer option and argument: plain ASCII digits, in a range."""

from __future__ import annotations

from typing import Any

import click

from ordo.arguments import integer_text


class IntegerRange(click.IntRange):
    """click's IntRange of integers written as the ORDO_* settings write them (`integer_text`).

    click reads a number with int(), which also takes `1_000`, `+5`, ` 5 ` and other scripts'
    digits: `--to 1_000` was taken for 1000 and `--max-changes` of an Arabic-Indic five (U+0665)
    for 5, while the same texts in the settings' variables are refused. One form for both, and
    one message saying what it is.
    """

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The int of a text `value` in plain digits, in the range; a usage error otherwise."""
        if isinstance(value, str):
            try:
                value = integer_text(value)
            except ValueError as exc:
                self.fail(str(exc), param, ctx)
        return super().convert(value, param, ctx)
