"""Bytes in and out: ranges of a file (source) and single frames (frames)."""
