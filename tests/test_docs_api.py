"""The API reference (docs/api/<package>.md, built by autodoc) covers every library module, and
autodoc has something to show for every public function and class: a docstring.

autodoc documents only what a page names and skips members without a docstring, so a new module
without its ``automodule`` line, or a public function without a docstring, would silently be
missing from the site that ``.ci/run`` builds.
"""

import importlib
import inspect
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
# docs/api/<page>.md -> the folder of the package it documents.
FOLDERS = {"maskdp_jax": "maskdp_jax", "accounting": "accounting", "models": "models",
           "data": "data", "run": "maskdp_jax/run", "audit": "maskdp_jax/audit",
           "release": "maskdp_jax/release", "anonymize": "maskdp_jax/anonymize",
           "reporting": "maskdp_jax/reporting"}
PACKAGES = tuple(FOLDERS)


def _modules(page: str) -> list[str]:
    package = "maskdp_jax" if page == "maskdp_jax" else f"maskdp_jax.{page}"
    return [package if p.stem == "__init__" else f"{package}.{p.stem}"
            for p in sorted((ROOT / FOLDERS[page]).glob("*.py"))]


def _documented(package: str) -> set[str]:
    page = (ROOT / "docs" / "api" / f"{package}.md").read_text()
    return set(re.findall(r"^\.\. automodule:: (\S+)$", page, flags=re.M))


@pytest.mark.parametrize("package", PACKAGES)
def test_every_module_has_its_automodule_on_the_package_page(package):
    missing = set(_modules(package)) - _documented(package)
    assert not missing, f"add '.. automodule:: <name>' to docs/api/{package}.md for {missing}"
    stale = _documented(package) - set(_modules(package))
    assert not stale, f"docs/api/{package}.md names modules that do not exist: {stale}"


def test_the_api_index_lists_every_package_page():
    index = (ROOT / "docs" / "api.md").read_text()
    assert all(f"api/{package}\n" in index for package in PACKAGES)


def _undocumented(module_names: list[str]) -> list[str]:
    """Modules without a docstring, and their public functions and classes without one."""
    out = []
    for name in module_names:
        module = importlib.import_module(name)
        if not module.__doc__:
            out.append(name)
        for key, value in vars(module).items():
            if key.startswith("_") or getattr(value, "__module__", None) != name:
                continue  # private, or imported from elsewhere (documented where it is defined)
            if (inspect.isfunction(value) or inspect.isclass(value)) and not value.__doc__:
                out.append(f"{name}.{key}")
    return out


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_function_and_class_has_a_docstring(package):
    undocumented = _undocumented(_modules(package))
    assert not undocumented, f"autodoc would skip these (no docstring): {undocumented}"


def test_the_checker_sees_a_missing_docstring(tmp_path, monkeypatch):
    (tmp_path / "pkg_undoc").mkdir()
    (tmp_path / "pkg_undoc" / "__init__.py").write_text("")
    (tmp_path / "pkg_undoc" / "m.py").write_text(
        '"""A module."""\n\nimport os\n\n\ndef f():\n    pass\n\n\ndef _g():\n    pass\n\n\n'
        'class C:\n    """Documented."""\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _undocumented(["pkg_undoc", "pkg_undoc.m"]) == ["pkg_undoc", "pkg_undoc.m.f"]
