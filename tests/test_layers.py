"""The layers of the tree (README "Layout"): no import runs up the layers.

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
