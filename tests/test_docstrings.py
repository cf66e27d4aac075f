"""The examples in the package's docstrings run and print what they say; public classes have one.

The modules are found by walking the package, so a new module's examples are tested without
anyone adding it to a list.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import inspect
import pkgutil
from pathlib import Path

import pytest

import hts_lightning
from tests.conftest import require_module

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(hts_lightning.__path__, "hts_lightning.")
    if not info.ispkg
)
# Modules whose examples need an optional extra: (module, the package it needs).
NEEDS = {"hts_lightning.envs.football": "gfootball", "hts_lightning.envs.envpool": "envpool"}


def _source(name: str) -> str:
    return Path(importlib.util.find_spec(name).origin).read_text()


def test_the_walk_finds_every_module_file():
    # A folder without __init__.py would be skipped by the walk, its examples never run.
    root = Path(hts_lightning.__file__).parent
    files = {
        ".".join(("hts_lightning", *path.relative_to(root).with_suffix("").parts))
        for path in root.rglob("*.py")
        if path.name != "__init__.py"
    }
    assert set(MODULES) == files
    assert "hts_lightning.strategies.delayed_ddp" in MODULES


@pytest.mark.parametrize("name", [name for name in MODULES if ">>> " in _source(name)])
def test_docstring_examples(name):
    if name in NEEDS:
        require_module(NEEDS[name])
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has '>>> ' in its source but no example doctest finds"
    assert result.failed == 0


@pytest.mark.parametrize("name", MODULES)
def test_public_classes_have_an_example(name):
    if name in NEEDS:
        require_module(NEEDS[name])
    module = importlib.import_module(name)
    public = [getattr(module, n) for n in getattr(module, "__all__", [])]
    classes = [
        c
        for c in public
        if inspect.isclass(c) and c.__module__ == name and not issubclass(c, BaseException)
    ]
    finder = doctest.DocTestFinder(recurse=False)
    missing = [c.__name__ for c in classes if not any(t.examples for t in finder.find(c))]
    assert missing == [], f"{name}: public classes without a docstring example: {missing}"
