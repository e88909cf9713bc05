"""The layers of the tree (README, "Code layout"): no import runs up the layers.

Read from the source with ``ast`` (every ``import`` statement, also inside functions), so a lazy
import cannot hide an upward dependency.
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

# package -> first-party packages it may import (besides itself).
ALLOWED = {
    "accounting": set(),
    "models": set(),
    "data": set(),
    "maskdp_jax": {"accounting"},
    "run": {"accounting", "models", "data", "maskdp_jax", "configs"},
    "reporting": {"accounting", "models", "data", "maskdp_jax"},
    "release": {"accounting", "data", "maskdp_jax", "reporting", "run"},
    "audit": {"accounting", "data", "maskdp_jax", "models", "reporting", "run", "release"},
    "anonymize": {"data"},
}
FIRST_PARTY = set(ALLOWED) | {"configs", "train", "sweep", "benchmarks", "tests"}
# Third-party imports a package must not make (the DP core: no IO layers, no plots, no configs).
FORBIDDEN = {
    "maskdp_jax": {"matplotlib", "ml_collections", "orbax", "tensorboardX"},
    "data": {"ml_collections", "matplotlib"},
    "accounting": {"matplotlib", "ml_collections", "orbax"},
    "models": {"matplotlib", "ml_collections"},
    "anonymize": {"jax", "flax", "matplotlib"},
}


def _imports(path: pathlib.Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_no_import_runs_up_the_layers(package):
    for path in sorted((ROOT / package).rglob("*.py")):
        found = _imports(path)
        upward = (found & FIRST_PARTY) - ALLOWED[package] - {package}
        assert not upward, f"{path.relative_to(ROOT)} imports {sorted(upward)}"
        banned = found & FORBIDDEN.get(package, set())
        assert not banned, f"{path.relative_to(ROOT)} imports {sorted(banned)}"


def test_the_checker_sees_an_upward_import(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("def f():\n    from run import guard\n    import matplotlib.pyplot\n")
    assert {"run", "matplotlib"} <= _imports(bad)


def _test_map() -> dict[str, list[str]]:
    """BUILD.md's "Where each module is tested" table: ``{module path: [test files]}``."""
    text = (ROOT / "BUILD.md").read_text()
    section = text.split("## Where each module is tested", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = [f.strip().strip("`") for f in cells[1].split(",")]
    return rows


def test_every_library_module_has_a_row_in_the_test_map():
    rows = _test_map()
    modules = {str(p.relative_to(ROOT)) for package in ALLOWED
               for p in (ROOT / package).rglob("*.py") if p.name != "__init__.py"}
    assert modules - set(rows) == set(), "add these modules to BUILD.md's test map"
    assert set(rows) - modules == set(), "BUILD.md's test map names modules that do not exist"
    for module, files in rows.items():
        for name in files:
            assert (ROOT / "tests" / name).is_file(), f"{module}: no tests/{name}"
