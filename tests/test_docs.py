"""The documentation site stays whole: every example has a page, every public package a reference.

The strict build itself (broken links, stale API references, a missing included file) is the
``mkdocs build --strict`` phase of ``.ci/run``; these checks are the ones a build cannot make,
because a file nobody mentions breaks nothing.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
EXAMPLES = sorted(p.name for p in (ROOT / "examples").glob("*.py"))
PACKAGES = sorted(p.parent.name for p in (ROOT / "src" / "agentfootprint").glob("*/__init__.py")
                  if not p.parent.name.startswith("_"))
INCLUDE = re.compile(r'^-{1,2}8<-{1,2} "([^"]+)"\s*$', re.M)
"""A pymdownx.snippets line: the page shows the named file itself, never a copy."""


def _pages() -> dict[str, str]:
    return {str(p.relative_to(DOCS)): p.read_text(encoding="utf-8") for p in DOCS.rglob("*.md")}


def _included() -> dict[str, list[str]]:
    """Included file → the pages that include it."""
    found: dict[str, list[str]] = {}
    for page, text in _pages().items():
        for path in INCLUDE.findall(text):
            found.setdefault(path, []).append(page)
    return found


def test_there_are_examples_and_pages() -> None:
    """Guards the parametrised tests below against passing vacuously."""
    assert EXAMPLES and "index.md" in _pages()


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_is_shown_on_a_page(name: str) -> None:
    """A new example without a tutorial page fails here: it is included, as the file itself."""
    assert f"examples/{name}" in _included(), (
        f"examples/{name} is on no docs page; include it in one with a line "
        f'--8<-- "examples/{name}" inside a ```python block')


def test_every_included_file_exists() -> None:
    """An include naming a file that is gone (a renamed example) is caught before the build."""
    missing = {path: pages for path, pages in _included().items() if not (ROOT / path).is_file()}
    assert not missing


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_package_has_a_reference_page(package: str) -> None:
    """Each subpackage with a public face (``__all__``) is rendered from its docstrings."""
    module = importlib.import_module(f"agentfootprint.{package}")
    if not getattr(module, "__all__", None):
        pytest.skip(f"agentfootprint.{package} exports nothing")
    directive = re.compile(rf"^::: agentfootprint\.{package}\s*$", re.M)
    assert any(directive.search(text) for text in _pages().values()), (
        f"no docs page renders agentfootprint.{package}; add '::: agentfootprint.{package}' "
        f"to docs/reference/{package}.md and the nav in mkdocs.yml")


@pytest.fixture(scope="module")
def static_package() -> Any:
    """The package as mkdocstrings sees it: read from source by griffe, never imported."""
    griffe = pytest.importorskip("griffe", reason="the docs extra is not installed")
    return griffe.load("agentfootprint", search_paths=[str(ROOT / "src")],
                       resolve_aliases=False)


@pytest.mark.parametrize("package", ["", *PACKAGES])
def test_every_public_name_is_visible_to_the_reference(package: str,
                                                       static_package: Any) -> None:
    """A name served only by a lazy ``__getattr__`` is invisible to static analysis, so the API
    reference would silently leave it out: import it under ``if TYPE_CHECKING:`` as well."""
    name = f"agentfootprint.{package}".rstrip(".")
    exported = getattr(importlib.import_module(name), "__all__", None)
    if not exported:
        pytest.skip(f"{name} exports nothing")
    module = static_package[package] if package else static_package
    hidden = [n for n in exported if n not in module.members]
    assert not hidden, (f"{name} exports {hidden}, which the docs cannot see; import them in "
                        f"its __init__.py under `if TYPE_CHECKING:`")


def test_every_page_is_in_the_nav() -> None:
    """A page left out of mkdocs.yml's nav is unreachable from the site's menu."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    listed = set(re.findall(r":\s*([\w/.-]+\.md)\s*$", config, re.M))
    assert set(_pages()) - listed == set()


def test_readme_links_the_docs_entry_page() -> None:
    """The README sends a reader to the site's entry page, before the first section."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    intro = readme.split("\n## ", 1)[0]
    assert "(docs/index.md)" in intro


def _least_flips_for_causal(look: int, base_flips: int, base_runs: int) -> int | None:
    from agentfootprint.explain._verdict import DEFAULT_ALPHA, LOOKS, look_decision

    return next((k for k in range(look + 1) if look_decision(
        k, look, base_flips, base_runs, alpha=DEFAULT_ALPHA, final=look == LOOKS[-1]
    ).decision == "flipped"), None)


def test_the_verdict_numbers_on_the_explanations_page_are_the_codes() -> None:
    """The page's table of flips needed for CAUSAL is recomputed from the verdict rule, so a
    change to the looks, alpha or the test fails here until the page says the new numbers."""
    from agentfootprint.explain._localize import DEFAULT_BUDGET
    from agentfootprint.explain._verdict import BASELINE_RUNS, DEFAULT_ALPHA, LOOKS

    page = (DOCS / "explanations.md").read_text(encoding="utf-8")
    assert LOOKS == (4, 8, 16, 32) and "**4, 8, 16 and 32**" in page
    assert BASELINE_RUNS == 8 and DEFAULT_ALPHA == 0.01 and DEFAULT_BUDGET == 160
    assert "(default **0.01**)" in page and "budget=160" in page
    for base_flips, base_runs in ((0, 8), (1, 16), (2, 16)):
        row = next(line for line in page.splitlines()
                   if line.startswith(f"| {base_flips} of {base_runs} |"))
        cells = [cell.strip() for cell in row.strip("|").split("|")][1:]
        for look, cell in zip(LOOKS, cells, strict=True):
            least = _least_flips_for_causal(look, base_flips, base_runs)
            expected = "—" if least is None else f"{least} of {look}"
            assert cell.startswith(expected), (row, look, expected)
