"""Commands whose arguments are numbers: a negative one is an argument, not an unknown option.

click takes every word that starts with "-" for an option, and has no setting for negative
numbers, so `ordo processors split p -1` said "No such option '-1'" instead of refusing the
segment id as every other bad one is (argparse reads `-1` as an argument when no option looks
like a negative number, and none of ordo's does). `--` still works, as in every command.
"""

from __future__ import annotations

import re
from typing import Any

import click

_NEGATIVE_NUMBER = re.compile(r"-\d+|-\d*\.\d+")
_MARK = "\0"
"""Put before a negative number while click parses: a word starting with it is no option, and
no command-line word holds a NUL (the operating system ends each one there)."""


class NumberArgumentsCommand(click.Command):
    """A click command that reads a word that is a negative number as an argument (`-1`, `-0.5`).

    Such a word is an option's value, after an option that takes one, as before; anywhere else
    it is the next argument, which the argument's type then checks (SEGMENT_ID refuses `-1` as
    out of range). Every other word that starts with "-" is an option, or unknown, as before.
    """

    def make_parser(self, ctx: click.Context) -> Any:
        """Click's parser, reading negative numbers as arguments (see the class)."""
        parser = super().make_parser(ctx)
        parse_args = parser.parse_args

        def parse_negative_numbers_as_arguments(
            args: list[str],
        ) -> tuple[dict[str, Any], list[str], list[Any]]:
            marked = [_MARK + arg if _NEGATIVE_NUMBER.fullmatch(arg) else arg for arg in args]
            opts, rest, order = parse_args(args=marked)
            values = {name: _unmarked(value) for name, value in opts.items()}
            return values, [_unmarked(arg) for arg in rest], order

        # click builds its parser here and calls it right after: the one place to step in.
        parser.parse_args = parse_negative_numbers_as_arguments  # type: ignore[method-assign]
        return parser


def _unmarked(value: Any) -> Any:
    """`value` as given on the command line: a word, a list (`multiple`) or tuple (`nargs`)."""
    if isinstance(value, str):
        return value.removeprefix(_MARK)
    if isinstance(value, list | tuple):
        return type(value)(_unmarked(item) for item in value)
    return value
