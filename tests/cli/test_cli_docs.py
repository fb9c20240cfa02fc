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


def _sections(text: str) -> dict[str, str]:
    """Each `## ordo ...` section's text by its command path; "" holds the text before them."""
    preamble, *chunks = text.split("\n## ")
    sections = {"": preamble}
    for chunk in chunks:
        head, _, body = chunk.partition("\n")
        sections[head.strip()] = body
    return sections


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


def test_every_option_is_documented_with_its_command() -> None:
    """In the command's section, a group's above it (options its commands share) or the top."""
    sections = _sections(DOCS.read_text(encoding="utf-8"))
    for path, command in _commands(cli, "ordo"):
        words = path.split()
        where = "".join(sections.get(" ".join(words[:n]), "") for n in range(len(words) + 1))
        for param in command.params:
            if isinstance(param, click.Option):
                for option in (*param.opts, *param.secondary_opts):
                    assert option in where, f"{path} {option} is missing from docs/cli.md"
