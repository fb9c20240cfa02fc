from __future__ import annotations

import importlib

import pytest

import ordo

PACKAGES = [
    "ordo",
    "ordo.acking",
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
