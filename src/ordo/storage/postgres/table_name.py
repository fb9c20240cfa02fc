"""A captured PostgreSQL table as `--table` names it: `table`, `schema.table`, or quoted parts.

A name holding a dot cannot be written plainly: `my.table` is the table `table` in the schema
`my`. SQL's identifier quoting names it: `"my.table"` or `public."my.table"`, with `""` for a
double quote inside a quoted part. An unquoted part is taken exactly as written (not lower-cased
as SQL would), as ordo always took it, so `Orders` is the table named `Orders`.
"""

from __future__ import annotations

import re

from ordo.errors import ConfigurationError
from ordo.storage.sql_materialized_table import quote_identifier

# One part: a quoted identifier (its inside, `""` for a quote) or plain text up to a dot.
_PART = re.compile(r'"((?:[^"]|"")*)"|([^".]*)')


def split_table_name(given: str) -> tuple[str | None, str]:
    """The schema (None when unqualified) and the table that `given` names.

    Raises:
        ConfigurationError: a double quote that does not open and close a whole part, an empty
            part (`""`, `.t`, `s.`), or more than two parts (a third would be the database's).

    """
    parts: list[str] = []
    position = 0
    while True:
        match = _PART.match(given, position)
        assert match is not None  # noqa: S101 - the plain alternative matches empty text
        quoted, plain = match.groups()
        position = match.end()
        if position < len(given) and given[position] != ".":
            msg = (
                f"table {given!r} has a double quote that does not open or close a whole name: "
                'quote whole names, as in "my.table" or public."my.table" (with "" for a double '
                "quote inside one)"
            )
            raise ConfigurationError(msg)
        part = plain if quoted is None else quoted.replace('""', '"')
        if not part:
            msg = f"table {given!r} has an empty name: give table or schema.table"
            raise ConfigurationError(msg)
        parts.append(part)
        if position == len(given):
            break
        position += 1  # past the dot
    if len(parts) > 2:
        msg = (
            f"table {given!r} has {len(parts)} dot-separated names: give table or schema.table, "
            'and quote a name that holds a dot ("my.table")'
        )
        raise ConfigurationError(msg)
    return (None, parts[0]) if len(parts) == 1 else (parts[0], parts[1])


def join_table_name(schema: str, name: str) -> str:
    """`schema.table` as `split_table_name` reads it back: a part holding a dot or quote quoted."""
    return ".".join(_part(part) for part in (schema, name))


def _part(part: str) -> str:
    """One part of a table name, quoted (doubling its quotes) when it holds a dot or a quote."""
    return quote_identifier(part) if "." in part or '"' in part else part
