"""Every relative link in the repository's Markdown (README, BUILD, docs/ with the guides and the
benchmarks, the package READMEs, the committed results) points at a file or folder that exists."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
# The repository's own pages: top level, each package's README, docs/ (the documentation site's
# sources and the committed results); not what a run writes into an ignored workdir, nor the
# site that Sphinx builds into docs/_build (it copies the sources there).
BUILD = ROOT / "docs" / "_build"
PAGES = sorted(p for p in {*ROOT.glob("*.md"), *ROOT.glob("*/*.md"), *(ROOT / "docs").rglob("*.md"),
                            *(ROOT / "benchmarks").rglob("*.md")}
               if BUILD not in p.parents)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def relative_links(text: str) -> list[str]:
    """The link targets of ``text`` that are paths in the repository (no URL, no pure anchor)."""
    out = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        out.append(target.split("#", 1)[0])
    return out


def test_the_link_pattern_finds_paths_and_skips_urls_and_anchors():
    text = "[a](docs/design.md#why) ![b](x.png) [c](https://x.org) [d](#top) [e](../y.md \"t\")"
    assert relative_links(text) == ["docs/design.md", "x.png", "../y.md"]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_resolves(page):
    missing = [t for t in relative_links(page.read_text())
               if not (page.parent / t).resolve().exists()]
    assert not missing, f"{page.relative_to(ROOT)}: no such file for {missing}"
