"""The ``>>>`` examples of every library module run, each module imported by its installed name.

pytest's ``--doctest-modules`` imports a file by its path, so ``models/mvit.py`` would become a
second, top-level ``models.mvit`` beside ``maskdp_jax.models.mvit``: the examples are run here
instead, from the modules the installed package resolves.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pathlib
import pkgutil
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _packages() -> list[str]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["setuptools"]["packages"]


def _modules_with_examples() -> list[str]:
    """Every module of every package whose source holds a ``>>>`` example."""
    out = []
    for package in _packages():
        locations = importlib.util.find_spec(package).submodule_search_locations
        names = [package] + [f"{package}.{m.name}" for m in pkgutil.iter_modules(locations)
                             if not m.ispkg]
        for name in names:
            origin = importlib.util.find_spec(name).origin  # None: a folder of data files
            if origin and ">>>" in pathlib.Path(origin).read_text(encoding="utf-8"):
                out.append(name)
    return sorted(out)


MODULES = _modules_with_examples()


def test_the_examples_are_found_in_every_layer():
    assert {"maskdp_jax.core.gradient", "maskdp_jax.models.convert", "maskdp_jax.accounting.ledger",
            "maskdp_jax.data.clips", "maskdp_jax.run.command"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner()
    failures = []
    for test in finder.find(module, name):
        result = runner.run(test, out=failures.append)
        assert result.attempted or not test.examples
    assert not failures, "".join(failures)
