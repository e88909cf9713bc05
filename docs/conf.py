"""Sphinx configuration of the maskdp-jax documentation site.

Build (warnings are errors; the same command runs in ``.ci/run``)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

Why Sphinx + MyST + autodoc + napoleon: it is what JAX, Flax and Optax build their sites with, so
a user of those finds the same layout here, and it reads what this repository already has:
Markdown pages (MyST-Markdown, so GitHub renders the same files) and Google-style docstrings
(napoleon) with ``:mod:``/``:class:`` cross-references, from which autodoc generates the API
reference. MkDocs with mkdocstrings would need the docstrings' reST roles rewritten.
The theme is sphinx-book-theme, JAX's.

``nitpicky`` is on: every cross-reference in our pages and docstrings must resolve. What it may
not resolve is listed in ``nitpick_ignore_regex`` below, with the reason for each entry.
"""

import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)  # the packages are not installed: the repository root is the import root
os.environ.setdefault("JAX_PLATFORMS", "cpu")  # importing the modules must not look for a GPU

project = "maskdp-jax"
author = "the maskdp-jax developers"
copyright = "the maskdp-jax developers"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
# results/: the committed run outputs (their report.md pages are written by the code, linked
# from the guides as files, not built as pages); _build: the output; figures/: a script.
exclude_patterns = ["_build", "results/**", "figures/**", "README.md"]

myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 3  # [text](page.md#a-heading) links resolve to the heading's slug

autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_mock_imports = []
napoleon_google_docstring = True
napoleon_numpy_docstring = False

nitpicky = True
nitpick_ignore_regex = [
    # Third-party types in signatures and docstrings: their projects' inventories are not
    # fetched (CI builds offline), so a reference to them cannot resolve.
    (r"py:.*", r"(jax|jnp|jaxlib|flax|nn|optax|chex|np|numpy|scipy|ml_collections|orbax|grain|"
               r"dp_accounting|absl|tqdm|matplotlib|PIL|cv2|av|decord|sklearn|shap|lime|"
               r"tensorflow|tensorboardX|safetensors|mpmath|einops|pydantic|jax_privacy)(\..*)?"),
    # Standard-library and typing names, likewise without the Python inventory.
    (r"py:.*", r"(typing|collections|dataclasses|enum|os|pathlib|threading|concurrent|"
               r"contextlib|abc|types|io|json|signal|functools)(\..*)?"),
    (r"py:class", r"(Any|Callable|Iterable|Iterator|Sequence|Mapping|Protocol|NamedTuple|"
                  r"Optional|Union|Literal|TypeVar|Generic|ClassVar|Self|"
                  r"int|float|str|bool|bytes|dict|list|tuple|set|frozenset|object|type|"
                  r"Exception|ValueError|RuntimeError|OSError|None|NoneType|ellipsis|"
                  r"Array|ArrayLike|PyTree|DTypeLike|Path|PathLike)"),
]

html_theme = "sphinx_book_theme"
html_title = "maskdp-jax"
html_theme_options = {
    "show_toc_level": 2,
    "use_download_button": False,
    "use_fullscreen_button": False,
}
html_static_path = []
