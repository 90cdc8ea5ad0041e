"""Resource limits checked before any allocation driven by untrusted input."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """Upper bounds on what a file or blob may claim (each field: docs/limits.md).

    >>> Limits(max_frames=0)
    Traceback (most recent call last):
    ...
    ValueError: Limits.max_frames must be at least 1
    """

    max_frames: int = 1 << 24
    max_frame_bytes: int = 1 << 30
    max_frame_byte_count: int = (1 << 31) - 1
    max_image_bytes: int = 1 << 40

    def __post_init__(self) -> None:
        for name in ("max_frames", "max_frame_bytes", "max_frame_byte_count", "max_image_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"Limits.{name} must be at least 1")


DEFAULT_LIMITS = Limits()
