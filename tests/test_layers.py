"""The layers of the tree (README, "Code layout"): no import runs up the layers, and every
first-party import goes through the one import root, ``maskdp_jax``.

Read from the source with ``ast`` (every ``import`` statement, also inside functions), so a lazy
import cannot hide an upward dependency.
"""

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

# layer -> the folders (or files) that hold it, relative to the repository root. The DP core is
# maskdp_jax/core/ and the package's face (maskdp_jax/__init__.py, which re-exports the core's
# public API). The commands are the top layer: every other top-level module of maskdp_jax/ and
# every package's __main__.py (nothing imports them).
COMMANDS = tuple(sorted(p.name for p in (ROOT / "maskdp_jax").glob("*.py")
                        if p.name != "__init__.py"))
HOME = {
    "accounting": ["accounting"],
    "models": ["models"],
    "data": ["data"],
    "configs": ["configs"],
    "weights": ["maskdp_jax/weights"],
    "core": ["maskdp_jax/core", "maskdp_jax/__init__.py"],
    "run": ["maskdp_jax/run"],
    "reporting": ["maskdp_jax/reporting"],
    "release": ["maskdp_jax/release"],
    "audit": ["maskdp_jax/audit"],
    "anonymize": ["maskdp_jax/anonymize"],
    "commands": [f"maskdp_jax/{name}" for name in COMMANDS] + sorted(
        str(p.relative_to(ROOT)) for folder in ("maskdp_jax", "accounting", "models", "data")
        for p in (ROOT / folder).rglob("__main__.py")),
}
# layer -> the layers it may import (besides itself).
ALLOWED = {
    "accounting": set(),
    "models": set(),
    "data": set(),
    "weights": set(),
    "core": {"accounting"},
    "configs": {"data", "reporting"},
    "run": {"accounting", "models", "data", "core", "configs", "weights"},
    "reporting": {"accounting", "models", "data", "core"},
    "release": {"accounting", "data", "core", "reporting", "run"},
    "audit": {"accounting", "data", "core", "models", "reporting", "run", "release"},
    "anonymize": {"data", "configs"},
    "commands": set(HOME) - {"commands"},
}
# maskdp_jax.<name> -> the layer it belongs to (a name of the package's face, e.g.
# ``from maskdp_jax import Mechanism``, is the core's).
SUBPACKAGES = {name: name for name in HOME if name != "commands"}
SUBPACKAGES |= {pathlib.Path(name).stem: "commands" for name in COMMANDS}
# Names that must never be imported as roots of their own: the installed package has one root.
GENERIC_ROOTS = {"models", "accounting", "data", "configs", "core", "run", "reporting", "release",
                 "weights", "audit", "anonymize", *(pathlib.Path(name).stem for name in COMMANDS)}
LIBRARY_ONLY = {"benchmarks", "tests"}  # a library layer must not import these
# Third-party imports a layer must not make (the DP core: no IO layers, no plots, no configs).
FORBIDDEN = {
    "core": {"matplotlib", "ml_collections", "orbax", "tensorboardX"},
    "data": {"ml_collections", "matplotlib"},
    "accounting": {"matplotlib", "ml_collections", "orbax"},
    "models": {"matplotlib", "ml_collections"},
    "anonymize": {"jax", "flax", "matplotlib"},
}


def _layer_of(module: str, names: list[str]) -> set[str]:
    """The layers an import of ``module`` (``from module import names``) reaches."""
    parts = module.split(".")
    if parts[0] != "maskdp_jax":
        return set()
    if len(parts) > 1:
        return {SUBPACKAGES.get(parts[1], "core")}
    return {SUBPACKAGES.get(name, "core") for name in names}  # from maskdp_jax import data


def _imports(path: pathlib.Path) -> tuple[set[str], set[str]]:
    """``(top-level names, first-party layers)`` that ``path`` imports."""
    roots, layers = set(), set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                roots.add(alias.name.split(".")[0])
                layers |= _layer_of(alias.name, [])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
            layers |= _layer_of(node.module, [alias.name for alias in node.names])
    return roots, layers


def _files(layer: str) -> list[pathlib.Path]:
    out = []
    for home in HOME[layer]:
        path = ROOT / home
        out += [path] if path.suffix == ".py" else sorted(
            p for p in path.rglob("*.py") if p.name != "__main__.py")
    return out


@pytest.mark.parametrize("layer", sorted(HOME))
def test_no_import_runs_up_the_layers(layer):
    for path in _files(layer):
        roots, layers = _imports(path)
        upward = layers - ALLOWED[layer] - {layer}
        assert not upward, f"{path.relative_to(ROOT)} imports {sorted(upward)}"
        banned = roots & (FORBIDDEN.get(layer, set()) | LIBRARY_ONLY)
        assert not banned, f"{path.relative_to(ROOT)} imports {sorted(banned)}"


def test_first_party_code_imports_through_the_one_root():
    tracked = [p for p in ROOT.rglob("*.py")
               if not any(part.startswith(".") or part in ("build", "docs")
                          for part in p.relative_to(ROOT).parts[:-1])]
    for path in tracked:
        generic = _imports(path)[0] & GENERIC_ROOTS
        assert not generic, f"{path.relative_to(ROOT)} imports {sorted(generic)}: use maskdp_jax."
        # the same in >>> examples and in code run by a subprocess (strings)
        generic = set(re.findall(rf"(?:>>> |[\"';] *)(?:from|import) ({'|'.join(GENERIC_ROOTS)})\b",
                                 path.read_text()))
        assert not generic, f"{path.relative_to(ROOT)} runs code importing {sorted(generic)}"


def test_the_docs_code_imports_through_the_one_root():
    pages = [ROOT / "README.md", ROOT / "BUILD.md", *ROOT.glob("*/README.md"),
             *(ROOT / "docs").glob("*.md"), *(ROOT / "docs" / "guides").glob("*.md")]
    pattern = re.compile(rf"^\s*(?:from|import) ({'|'.join(GENERIC_ROOTS)})\b", re.M)
    for page in pages:
        generic = set(pattern.findall(page.read_text()))
        assert not generic, f"{page.relative_to(ROOT)} shows code importing {sorted(generic)}"


def test_the_checker_sees_an_upward_import(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("def f():\n    from maskdp_jax.run import guard\n    import matplotlib.pyplot\n"
                   "    from maskdp_jax import data, Mode\n    import models\n")
    roots, layers = _imports(bad)
    assert {"matplotlib", "models"} <= roots
    assert layers == {"run", "data", "core"}


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
    modules = {str(p.relative_to(ROOT)) for layer in HOME if layer != "configs"
               for p in _files(layer) if p.name != "__init__.py"}
    assert modules - set(rows) == set(), "add these modules to BUILD.md's test map"
    assert set(rows) - modules == set(), "BUILD.md's test map names modules that do not exist"
    for module, files in rows.items():
        for name in files:
            assert (ROOT / "tests" / name).is_file(), f"{module}: no tests/{name}"


def test_the_runs_entry_stays_short_and_its_defaults_few():
    """The run's one entry, ``train.train_and_evaluate``, reads as its steps (under 80 lines:
    each step is a function of its own), and the trainer and the run layer hold at most 10
    ``config.get(key, default)`` defaults (a default belongs in configs/default.py, where a
    reader finds it)."""
    tree = ast.parse((ROOT / "maskdp_jax" / "train.py").read_text())
    entry = next(n for n in ast.walk(tree)
                 if isinstance(n, ast.FunctionDef) and n.name == "train_and_evaluate")
    assert entry.end_lineno - entry.lineno + 1 < 80
    defaults = 0
    run_layer = sorted((ROOT / "maskdp_jax" / "run").glob("*.py"))
    for path in [ROOT / "maskdp_jax" / "train.py", *run_layer]:
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "get" and len(node.args) == 2
                    and "config" in ast.unparse(node.func.value)):
                defaults += 1
    assert defaults <= 10, defaults

