from __future__ import annotations

import importlib
import re

import pytest

import ordo

PACKAGES = [
    "ordo",
    "ordo.acking",
    "ordo.errors",
    "ordo.journal",
    "ordo.processing",
    "ordo.query",
    "ordo.settings",
    "ordo.spark",
    "ordo.tagging",
    "ordo.time",
]


def _isort_key(name: str) -> tuple[int, str]:
    """ruff's RUF022 order: CONSTANTS, then Classes, then functions."""
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_and_complete(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert exported == sorted(exported, key=_isort_key)
    for symbol in exported:
        assert hasattr(module, symbol), f"{name}.{symbol} is in __all__ but missing"
    public = {
        key
        for key, value in vars(module).items()
        if not key.startswith("_")
        and getattr(value, "__module__", "").startswith("ordo")
        and not isinstance(value, type(ordo))
    }
    assert public <= set(exported), f"{name} exports {sorted(public - set(exported))} silently"


def test_every_error_derives_from_ordo_error() -> None:
    errors = importlib.import_module("ordo.errors")
    classes = [
        v for v in vars(errors).values() if isinstance(v, type) and v.__module__ == errors.__name__
    ]
    assert classes
    assert all(issubclass(c, ordo.OrdoError) for c in classes)


def test_every_error_names_ordo_errors_as_its_module() -> None:
    """Tracebacks print `ordo.errors.StorageError` and pickles refer to it there.

    The errors are defined in the modules of the `ordo.errors` package, which was one module.
    """
    errors = importlib.import_module("ordo.errors")
    elsewhere = {
        name: value.__module__
        for name, value in vars(errors).items()
        if isinstance(value, type)
        and issubclass(value, errors.OrdoError)
        and value.__module__ != errors.__name__
    }
    assert elsewhere == {}


def test_the_error_tree_in_ordo_errors_names_every_error_under_its_base() -> None:
    """The module's docstring is the map users read: two errors added later were missing."""
    from ordo import errors

    tree: dict[str, str] = {}
    parents: list[str] = []
    for line in (errors.__doc__ or "").splitlines():
        found = re.fullmatch(r"([│ ]*)(?:[├└]── )?(\w+Error)\b.*", line)
        if found is None:
            continue
        depth = len(found[1]) // 4 + (1 if "──" in line else 0)
        del parents[depth:]
        tree[found[2]] = parents[-1] if parents else ""
        parents.append(found[2])
    classes = {
        name: value
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.OrdoError)
    }
    assert set(tree) == set(classes)
    assert {name: tree[name] for name in classes if name != "OrdoError"} == {
        name: next(b.__name__ for b in value.__bases__ if issubclass(b, errors.OrdoError))
        for name, value in classes.items()
        if name != "OrdoError"
    }
