"""How the statuses' rich tables print (`ordo status`, `ordo cdc status`): each cell as it is."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


def print_tables(*tables: Table) -> None:
    """Print `tables` on stdout, every string in them as it is.

    Rich reads console markup (`[bold]`) and emoji codes (`:smile:`) in the strings it prints,
    and the cells hold names anyone chose (tags, processors, owners, tables, materializers,
    capture segments): a tag `[bold]x` showed as a bold `x`, `:smile:` as an emoji, and `[/x]`
    ended the command with rich's MarkupError. No cell is meant as markup, so this console
    reads none; line breaks and tabs in a name are shown_name's to quote.
    """
    console = Console(markup=False, emoji=False)
    for table in tables:
        console.print(table)
