from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from ordo.cli.root import cli

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs" / "cli.md"


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


def _unclosed_code_span(text: str) -> str | None:
    """The start of the first inline code span that no run of as many backticks closes.

    As in CommonMark, a span opened by N backticks ends at the next run of exactly N in its
    paragraph; fenced blocks are left out. An error message quoted with a backtick inside it
    (`... run `ordo init``) otherwise swallows the rest of its paragraph into code.
    """
    prose = re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)
    for paragraph in re.split(r"\n\s*\n", prose):
        runs = list(re.finditer(r"`+", paragraph))
        at = 0
        while at < len(runs):
            width = len(runs[at].group())
            ends = [n for n in range(at + 1, len(runs)) if len(runs[n].group()) == width]
            if not ends:
                return paragraph[runs[at].start() :][:80]
            at = ends[0] + 1
    return None


@pytest.mark.parametrize(
    "path",
    [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *(ROOT / "examples").rglob("*.md")],
    ids=lambda path: str(path.relative_to(ROOT)),
)
def test_every_code_span_of_the_docs_is_closed(path: Path) -> None:
    """docs/cli.md quoted the SchemaVersionError with `ordo init` inside one backtick pair."""
    assert _unclosed_code_span(path.read_text(encoding="utf-8")) is None
