from __future__ import annotations

from pathlib import Path

import click

from ordo.cli.main import cli

DOCS = Path(__file__).parents[2] / "docs" / "cli.md"


def _commands(group: click.Group, prefix: str) -> list[tuple[str, click.Command]]:
    found: list[tuple[str, click.Command]] = []
    for name, command in group.commands.items():
        path = f"{prefix} {name}"
        found.append((path, command))
        if isinstance(command, click.Group):
            found.extend(_commands(command, path))
    return found


def test_every_command_has_help_and_a_section_in_the_docs() -> None:
    text = DOCS.read_text(encoding="utf-8")
    commands = _commands(cli, "ordo")
    assert commands
    for path, command in commands:
        assert command.help, f"{path} has no help text"
        assert f"## {path}\n" in text, f"{path} is missing from docs/cli.md"
        for param in command.params:
            if isinstance(param, click.Option):
                assert param.help, f"{path} {param.opts[0]} has no help text"
