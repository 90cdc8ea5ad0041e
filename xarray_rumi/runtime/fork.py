"""What a forked child must not inherit: the parent's threads, the locks they held, per-process caches."""

from __future__ import annotations

import os


def in_forked_child(reset) -> None:
    """Call ``reset()`` in the child after every ``os.fork`` (nowhere that cannot fork)."""
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=reset)
