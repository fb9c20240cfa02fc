"""Command groups that remember the words each command parses, for usage errors that quote them.

click takes `-abc` for the short options `-a`, `-b` and `-c` and reports the first unknown one
alone: `ordo events -abc` said "No such option '-a'", an option the user never typed (and
`-json` said `-j`). The parser keeps no record of the word, so the groups record the words they
hand to each command (`CommandGroup`) and `as_typed` finds the one that failed.
"""

from __future__ import annotations

import click

_WORDS = "ordo.cli.words"
"""The key in the invocation's `Context.meta` (which every context of it shares): the command
parsing last and the words it was given."""


class CommandGroup(click.Group):
    """A click group that records the words it parses itself, then those of its subcommand.

    Every group of `ordo` is one, so that the words of any command are known (`as_typed`).
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """The group's own options (the root's: no group hands it its words)."""
        ctx.meta[_WORDS] = (self, list(args))
        return super().parse_args(ctx, args)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """The subcommand and the words it parses, which are recorded."""
        name, command, rest = super().resolve_command(ctx, args)
        ctx.meta[_WORDS] = (command, list(rest))
        return name, command, rest


def as_typed(exc: click.NoSuchOption) -> click.NoSuchOption:
    """`exc` naming the whole word that failed (`-abc`, not `-a`); `exc` itself if it did.

    A word that is a long option with one dash too few (`-json`) is told the long one.
    """
    ctx = exc.ctx
    if ctx is None:
        return exc
    word = _failed_word(ctx, exc.option_name)
    if word is None or word == exc.option_name:
        return exc
    longer = f"-{word.partition('=')[0]}"
    is_long = any(longer in param.opts for param in ctx.command.get_params(ctx))
    return click.NoSuchOption(word, possibilities=[longer] if is_long else None, ctx=ctx)


def _failed_word(ctx: click.Context, option: str) -> str | None:
    """The word of `ctx`'s command in which the parser found the unknown `option`, if known.

    The command's parser reads longer and longer beginnings of its words: the first to fail
    on `option` ends with the word (a word read as an option's value never does).
    """
    command, words = ctx.meta.get(_WORDS, (None, []))
    if command is not ctx.command:
        return None
    parser = ctx.command.make_parser(ctx)
    for end in range(1, len(words) + 1):
        try:
            parser.parse_args(args=words[:end])
        except click.NoSuchOption as refused:
            if refused.option_name == option:
                return str(words[end - 1])
        except click.UsageError:
            continue  # the last word's option wants a value that comes later
    return None
