"""The ```python blocks of a Markdown page, and running them in order in one namespace.

Every docs test runs its page this way, so a failure names the page and the
block that broke.
"""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(page: str) -> list[str]:
    """The ```python blocks of ``page`` (a path from the repository root, e.g. ``"docs/stac.md"``)."""
    return _BLOCK.findall((ROOT / page).read_text())


def run_blocks(page: str, namespace: dict | None = None, *, before_each=None, after_each=None) -> int:
    """Run every block of ``page`` in order in ``namespace``; how many ran.

    ``before_each(block)`` / ``after_each(block)`` are called around each one
    (to reset or check a server's requests, say).
    """
    namespace = {} if namespace is None else namespace
    blocks = python_blocks(page)
    for number, block in enumerate(blocks, start=1):
        if before_each is not None:
            before_each(block)
        try:
            exec(compile(block, f"{page} block {number}", "exec"), namespace)
        except Exception as exc:  # name the block that broke
            raise AssertionError(f"{page} python block {number} failed: {exc!r}") from exc
        if after_each is not None:
            after_each(block)
    return len(blocks)
