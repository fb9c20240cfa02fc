"""STYLE.md section 1: dependencies point inward (checked by parsing every import), and no
module passes the size at which it is to be split."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).parents[1] / "src" / "ordo"

CORE = {
    "arguments",
    "errors",
    "forking",
    "documents",
    "types",
    "clock",
    "hashing",
    "reconnection",
    "settings",
    "stopping",
    "time",
    "wording",
}
CONCEPTS = {"journal", "tagging", "query", "processing", "acking", "cdc"}
OUTER = {"storage", "spark", "cli", "tools", "simulation"}
OPTIONAL = {"pyspark": "spark", "psycopg": "storage/postgres", "psycopg_pool": "storage/postgres"}
MAX_MODULE_LINES = 400
"""STYLE.md: "Aim for under 250 lines; split a module when it passes 400"."""


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _area(path: Path) -> str:
    relative = path.relative_to(SRC)
    return relative.parts[0].removesuffix(".py")


def test_core_and_concepts_never_import_outer_layers() -> None:
    offenders = []
    for path in SRC.rglob("*.py"):
        area = _area(path)
        if area not in CORE | CONCEPTS:
            continue
        for name in _imports(path):
            parts = name.split(".")
            if parts[0] == "ordo" and len(parts) > 1 and parts[1] in OUTER:
                offenders.append(f"{path.relative_to(SRC)} imports {name}")
    assert offenders == []


def test_core_modules_import_no_concept() -> None:
    offenders = []
    for path in SRC.rglob("*.py"):
        if _area(path) not in CORE:
            continue
        for name in _imports(path):
            parts = name.split(".")
            if parts[0] == "ordo" and len(parts) > 1 and parts[1] in CONCEPTS:
                offenders.append(f"{path.relative_to(SRC)} imports {name}")
    assert offenders == []


def test_optional_extras_are_imported_only_in_their_adapter() -> None:
    offenders = []
    for path in SRC.rglob("*.py"):
        relative = path.relative_to(SRC).as_posix()
        for name in _imports(path):
            home = OPTIONAL.get(name.split(".")[0])
            if home is not None and not relative.startswith(home):
                offenders.append(f"{relative} imports {name}")
    assert offenders == []


def test_nothing_imports_the_command_line() -> None:
    """Only the command line itself and `python -m ordo` (ordo/__main__.py), which runs it."""
    offenders = [
        f"{path.relative_to(SRC)}"
        for path in SRC.rglob("*.py")
        if _area(path) not in {"cli", "__main__"}
        and any(n.startswith("ordo.cli") for n in _imports(path))
    ]
    assert offenders == []


def test_no_module_passes_the_line_limit() -> None:
    too_long = {
        path.relative_to(SRC).as_posix(): lines
        for path in sorted(SRC.rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert too_long == {}, f"split these modules (lines), STYLE.md's limit is {MAX_MODULE_LINES}"
