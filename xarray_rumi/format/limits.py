"""Resource limits checked before any allocation driven by untrusted input."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """Upper bounds on what a file or blob may claim.

    >>> Limits().max_frames
    16777216
    >>> Limits(max_frames=10).max_frames
    10
    """

    #: frames per image (N); offsets and counts take 8-16 bytes per frame in memory.
    max_frames: int = 1 << 24
    #: decoded bytes of one frame (B * h * w * bytes per sample).
    max_frame_bytes: int = 1 << 30
    #: compressed bytes of one frame; a larger TileByteCounts entry is refused.
    max_frame_byte_count: int = (1 << 31) - 1
    #: decoded bytes of a whole image (B * Y * X * bytes per sample), 1 TiB.
    max_image_bytes: int = 1 << 40

    def __post_init__(self) -> None:
        for name in ("max_frames", "max_frame_bytes", "max_frame_byte_count", "max_image_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"Limits.{name} must be at least 1")


DEFAULT_LIMITS = Limits()
