"""The examples in docs/format.md and docs/limits.md run as written."""

from __future__ import annotations

import doctest
import pathlib

import pytest

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize("name", ["format.md", "limits.md"])
def test_doc_examples(name):
    result = doctest.testfile(str(DOCS / name), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
