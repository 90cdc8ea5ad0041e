"""Bytes from anywhere: exact byte ranges of a path or URL (``source``), retried (``retry``)."""
