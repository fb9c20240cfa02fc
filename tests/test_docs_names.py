"""Names the user documentation gives are names the code has.

A renamed setting, option or error leaves the docs naming one that does nothing: an `ORDO_*`
variable nobody reads is silently ignored, an option or error class that is gone cannot be
used or caught, and a source option missing from its table is undocumented. These checks read
the names from the docs and look each up in the code.
"""

from __future__ import annotations

import builtins
import re
import tomllib
from pathlib import Path

import click

from ordo import errors
from ordo.cli.environment import variables_read
from ordo.cli.root import cli
from ordo.spark.options import VALID_OPTIONS

ROOT = Path(__file__).parents[1]
USER_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TEST_SETUP = ROOT / "tests" / "conftest.py"
"""Reads the one variable for the test suite (ORDO_TEST_POSTGRES_DSN) that README names."""
OTHER_TOOLS_OPTIONS = {"--strict", "--conf"}
"""Options the docs give other tools (README: `mypy --strict`; docs/spark.md: spark-submit's
`--conf` in PYSPARK_SUBMIT_ARGS)."""


def test_every_variable_the_docs_name_is_read() -> None:
    """`ORDO_*` in README.md and docs/*.md: a settings key, an option's variable, or the log's."""
    read = variables_read(cli)
    for path in USER_DOCS:
        for name in set(re.findall(r"\bORDO_[A-Z0-9_]*[A-Z0-9]\b", path.read_text("utf-8"))):
            if name not in read:
                assert name in TEST_SETUP.read_text("utf-8"), f"{path.name}: {name} is read nowhere"


def _options(command: click.Command) -> set[str]:
    """The option names of `command` and of its subcommands."""
    names = {"--help"}
    for param in command.params:
        if isinstance(param, click.Option):
            names.update([*param.opts, *param.secondary_opts])
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            names |= _options(sub)
    return names


def test_every_long_option_the_docs_name_is_an_option_of_a_command() -> None:
    """tests/cli/test_cli_docs.py finds every option in docs/cli.md; this, no stale ones.

    docs/benchmarks.md is left out: it names the options of the scripts under bench/.
    """
    options = _options(cli) | OTHER_TOOLS_OPTIONS
    for path in USER_DOCS:
        if path.name != "benchmarks.md":
            named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", path.read_text("utf-8")))
            assert named <= options, f"{path.name} names {sorted(named - options)}"


def test_every_error_the_docs_name_is_one_ordo_raises() -> None:
    """A `...Error` in README.md or docs/*.md is in ordo.errors (or Python's own)."""
    for path in USER_DOCS:
        for name in set(re.findall(r"\b[A-Z][A-Za-z]*Error\b", path.read_text("utf-8"))):
            assert hasattr(errors, name) or hasattr(builtins, name), f"{path.name}: {name}"


def test_the_docs_table_of_source_options_lists_every_option() -> None:
    """docs/spark.md's table of `ordo_events_by_tag` options: every option the source takes."""
    text = (ROOT / "docs" / "spark.md").read_text("utf-8")
    first_cells = re.findall(r"^\| (.+?) \|", text, flags=re.MULTILINE)
    documented = {name for cell in first_cells for name in re.findall(r"`(\w+)`", cell)}
    assert documented == set(VALID_OPTIONS)


def test_the_docs_table_of_variables_lists_every_variable_ordo_reads() -> None:
    """docs/cli.md's "Environment variables": every variable read, and only those, each once.

    Half the settings' variables were named nowhere, and the capture's flush interval was the
    tag writer's variable, which no list could have said.
    """
    text = (ROOT / "docs" / "cli.md").read_text("utf-8")
    section = text.split("\n## Environment variables\n", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `(ORDO_[A-Z0-9_]+)` \|", section, flags=re.MULTILINE)
    read = variables_read(cli)
    assert sorted(listed) == sorted(read)


def test_every_test_the_docs_name_exists() -> None:
    """`tests/...py` and `tests/...py::test_name` in the docs: docs/guarantees.md cites proofs."""
    cited = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?`")
    for path in USER_DOCS:
        for file, name in cited.findall(path.read_text("utf-8")):
            source = ROOT / file
            assert source.is_file(), f"{path.name} cites {file}, which does not exist"
            if name:
                defined = re.search(rf"^def {name}\(", source.read_text("utf-8"), re.MULTILINE)
                assert defined, f"{path.name} cites {file}::{name}, which is not defined there"


def test_the_pipeline_example_names_what_its_files_read_and_hold() -> None:
    """examples/spark_pipelines/README.md, followed as written, must match its files.

    Its variables table is what transformations/orders.py reads, each variable setting a
    source option that exists; the options it points to exist; the files it lists are there;
    the storage it says the spec has is the spec's; and the `spark` extra brings the
    `spark-pipelines` command it runs (it told users to install that separately).
    """
    example = ROOT / "examples" / "spark_pipelines"
    readme = (example / "README.md").read_text("utf-8")
    orders = (example / "transformations" / "orders.py").read_text("utf-8")
    section = readme.split("\n## Options, from the environment\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(ORDO_\w+)` \| `(\w+)` \|", section, flags=re.MULTILINE)
    read = set(re.findall(r'os\.environ(?:\.get\(|\[)"(ORDO_\w+)"', orders))
    assert {variable for variable, _ in rows} == read
    for _, option in rows:
        assert option in VALID_OPTIONS
        assert f'"{option}"' in orders, f"orders.py sets no option {option}"
    pointed_to = re.findall(r"Other options \(([^)]*)\)", section)[0]
    assert set(re.findall(r"`(\w+)`", pointed_to)) <= set(VALID_OPTIONS)
    listed = re.findall(r"^\| `(\w[\w-]*(?:[./][\w-]+)+)` \|", readme, flags=re.MULTILINE)
    assert listed, "the README's table of files"
    for name in listed:
        assert (example / name).is_file(), f"README lists {name}, which is not in the example"
    spec = (example / "spark-pipeline.yaml").read_text("utf-8")
    (storage,) = re.findall(r"^storage: (\S+)$", spec, flags=re.MULTILINE)
    assert f"The spec's storage is {storage};" in readme
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    assert any(r.startswith("pyspark[pipelines]") for r in extras["optional-dependencies"]["spark"])
