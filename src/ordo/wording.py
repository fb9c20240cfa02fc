"""How counts and names read in messages, notes and progress lines, from errors to command lines."""

from __future__ import annotations


def counted(count: int, noun: str) -> str:
    """`count` with `noun` in the number it needs: "1 event", "2,000 persistence ids".

    A rebuild of one persistence id noted "1 persistence ids"; every message that counts
    says it this way.
    """
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def shown_name(name: str, *, separators: str = "") -> str:
    r"""`name` (a tag, persistence id, processor, owner or table) as a line of text shows it.

    Names may hold any character but NUL. Printed raw, a tag with a tab read as two columns of
    `ordo tags` and one with a newline as two tags. A name with a character that is not
    printable (str.isprintable: tabs, line breaks, other control characters) is shown as its
    Python repr, the quoting messages give a name (`tag 'a\tb'`); so is one that starts with a
    quote, which would otherwise read as such a repr, and one holding a character of
    `separators`, the punctuation a line puts between names (`events`' tag list `[a#1,b#2]`:
    a tag `a#1,b` read as two tags there). Any other name is shown as it is.
    """
    quoted = (
        not name.isprintable() or name.startswith(("'", '"')) or any(c in separators for c in name)
    )
    return repr(name) if quoted else name
