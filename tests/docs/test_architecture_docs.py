"""The modules docs/architecture.md names exist, and so do the test files any page names."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: A module as docs/architecture.md names it: ``reading/open.py``, ``cli.py``.
MODULE = re.compile(r"`((?:[a-z_]+/)?[a-z_]+\.py)`")


def test_every_module_the_architecture_page_names_exists():
    named = set(MODULE.findall((ROOT / "docs" / "architecture.md").read_text()))
    named = {m for m in named if not m.startswith(("test_", "tests/"))}   # test files: the test below
    assert len(named) > 30, sorted(named)
    missing = sorted(m for m in named if not (ROOT / "xarray_rumi" / m).is_file())
    assert missing == [], f"docs/architecture.md names modules that do not exist: {missing}"


def test_every_test_file_the_docs_name_exists():
    named = {(page.name, path) for page in PAGES for path in re.findall(r"tests/[\w/]+?\.py", page.read_text())}
    assert named, "no test file named in the docs"
    missing = sorted((page, path) for page, path in named if not (ROOT / path).is_file())
    assert missing == [], f"the docs name test files that do not exist: {missing}"
