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

import glob
import os
import re

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
try:  # autodoc reads the installed package (its subpackages are mapped from models/, data/, ...)
    import maskdp_jax  # noqa: F401
except ImportError as err:
    raise SystemExit("docs: maskdp_jax is not installed; run `pip install -e .` in the checkout "
                     "first (BUILD.md, \"One package\").") from err
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
# _build: the output; figures/: the script that draws the README picture.
exclude_patterns = ["_build", "figures/**"]
# The studies' per-run reports (docs/results/<study>/<run>/report.md, ~280 pages) took three
# quarters of the build's time; the site keeps each study's table and report and the run report
# a page links to, and the repository holds every run's report beside its report.json.
LINKED_RUN_REPORTS = {"results/headline_untuned/maskdp_eps1_k1_seed0/report.md"}
exclude_patterns += sorted(
    os.path.relpath(path, os.path.dirname(os.path.abspath(__file__)))
    for path in glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "*",
                                       "*_seed*", "report.md"))
    if os.path.relpath(path, os.path.dirname(os.path.abspath(__file__))) not in LINKED_RUN_REPORTS)

myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 3  # [text](page.md#a-heading) links resolve to the heading's slug

autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented"  # types only where the docstring speaks
autodoc_mock_imports = []
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True  # "Attributes:" as fields: autodoc documents the attributes themselves
napoleon_use_rtype = False  # a "Returns:" line's first words stay prose, not a type to resolve

nitpicky = True
# maskdp_jax re-exports its public API (``__all__``: ``maskdp_jax.PrivacyPlan`` is
# ``maskdp_jax.core.plan.PrivacyPlan``), and its page documents both names, so an unqualified
# reference such as ``PrivacyPlan`` in a signature finds two targets that are one object. Sphinx
# links the first; the warning says nothing wrong. Unresolved references still fail (nitpicky
# above).
suppress_warnings = ["ref.python"]
nitpick_ignore_regex = [
    # Third-party types in signatures and docstrings: their projects' inventories are not
    # fetched (CI builds offline), so a reference to them cannot resolve.
    (r"py:.*", r"(jax|jnp|jaxlib|flax|nn|optax|chex|np|numpy|scipy|ml_collections|orbax|grain|"
               r"dp_accounting|absl|tqdm|matplotlib|PIL|cv2|av|decord|sklearn|shap|lime|"
               r"tensorflow|tensorboardX|safetensors|mpmath|einops|pydantic|jax_privacy)(\..*)?"),
    # Standard-library and typing names, likewise without the Python inventory.
    (r"py:.*", r"(typing|collections|dataclasses|enum|os|pathlib|threading|concurrent|"
               r"contextlib|abc|types|io|json|signal|functools|tempfile|secrets|open|argparse)"
               r"(\..*)?"),
    # Type variables and private helpers that appear in signatures.
    (r"py:class", r"maskdp_jax\.run\.guard\.T|.*\._[A-Za-z]\w*"),
    (r"py:class", r"(Any|Callable|Iterable|Iterator|Sequence|Mapping|Protocol|NamedTuple|"
                  r"Optional|Union|Literal|TypeVar|Generic|ClassVar|Self|"
                  r"int|float|str|bool|bytes|dict|list|tuple|set|frozenset|object|type|"
                  r"Exception|ValueError|RuntimeError|OSError|None|NoneType|ellipsis|"
                  r"Array|ArrayLike|PyTree|DTypeLike|Path|PathLike)"),
    # napoleon reads the words before the first colon of an "Attributes:" or "Args:" entry that
    # names several fields at once ("mean / std: ...") or starts with prose as a type; such a
    # "type" has a space, a slash or a quote in it and is no reference.
    (r"py:class", r".*[^A-Za-z0-9_.].*"),
    # ... or a single lower-case word: a parameter or field name in "name: description" prose
    # (every class of this project is CamelCase; built-in types are listed above).
    (r"py:class", r"[a-z_][a-z0-9_]*"),
    # "Raises:" entries that name two exceptions at once ("ValueError / RuntimeError").
    (r"py:exc", r".* / .*"),
]

html_theme = "sphinx_book_theme"
html_title = "maskdp-jax"
html_theme_options = {
    "show_toc_level": 2,
    "use_download_button": False,
    "use_fullscreen_button": False,
}
html_static_path = ["_static"]
html_css_files = ["custom.css"]  # wider article: the result tables (custom.css says why)

# Markdown pages link repository files the way GitHub resolves them (``../../BUILD.md``), which
# tests/test_docs_links.py checks. Sphinx builds only docs/, so before a page is parsed its links
# to Markdown files and folders outside docs/ are rewritten: a file the site includes as a page
# (below) links to that page; a script in ``examples/`` links to its section of docs/examples.md,
# which shows it; any other Markdown file (raw benchmark output) becomes a download of the file; a
# folder (``examples/``) becomes its name in code, since a site cannot list it.
# Links to other files (code, JSON, images) need nothing: MyST makes them downloads or images.
INCLUDED = {"BUILD.md": "build.md", "accounting/README.md": "accounting-internals.md"}
_MD_LINK = re.compile(r"(?<!!)\[([^\]]*)\]\(([^)\s#]+)(#[^)\s]*)?\)")


def _rewrite_outside_links(app, docname, source):
    page_dir = os.path.dirname(str(app.env.doc2path(docname)))
    docs_dir = os.path.abspath(app.srcdir)

    def fix(match):
        text, target, anchor = match.group(1), match.group(2), match.group(3) or ""
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            return match.group(0)
        path = os.path.abspath(os.path.join(page_dir, target))
        if path.startswith(docs_dir + os.sep):
            return match.group(0)
        repo_path = os.path.relpath(path, ROOT)
        if re.fullmatch(r"examples/\w+\.py", repo_path):  # shown on the examples page
            name = os.path.splitext(os.path.basename(repo_path))[0]
            page = os.path.relpath(os.path.join(docs_dir, "examples.md"), page_dir)
            return f"[{text}]({page}#{name})"
        if os.path.isdir(path):
            return f"{text} (`{repo_path}/`)" if repo_path not in text else text
        if not target.endswith(".md"):
            return match.group(0)
        if repo_path in INCLUDED:
            page = os.path.relpath(os.path.join(docs_dir, INCLUDED[repo_path]), page_dir)
            return f"[{text}]({page}{anchor})"
        return f"{{download}}`{text} <{target}>`"

    source[0] = _MD_LINK.sub(fix, source[0])


def _keep_spreads_together(app, docname, source):
    """A table cell "0.97 ± 0.00" must not break at its spaces (a narrow column would show the
    spread on a line of its own): in the built page the spaces around ± do not break. The
    Markdown source keeps plain spaces (the committed-results test reads it)."""
    source[0] = source[0].replace(" ± ", "\u00a0±\u00a0")


def _skip_namedtuple_fields(app, what, name, obj, skip, options):
    """NamedTuple fields are documented by their class's "Attributes:"; autodoc would add each
    again as a property whose only text is "Alias for field number k"."""
    doc = getattr(obj, "__doc__", None) or ""
    return True if doc.startswith("Alias for field number") else None


def setup(app):
    app.connect("source-read", _rewrite_outside_links)
    app.connect("source-read", _keep_spreads_together)
    app.connect("autodoc-skip-member", _skip_namedtuple_fields)
