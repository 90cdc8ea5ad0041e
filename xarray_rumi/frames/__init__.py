"""The frame codec: one self-contained OpenZL frame each, and choosing how to compress."""
